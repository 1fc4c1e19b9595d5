"""Produce responses on the response topic (docs/design.md: response topic): Avro in single object encoding, keyed by
request id. The schema is `produce_response.avsc` beside this module, read as a package resource (so
it is found inside the zip Spark ships to executors).

Single object encoding (Avro spec): marker C3 01, the schema's 8-byte CRC-64-AVRO fingerprint
(little-endian, as Java's SchemaNormalization writes it), then the binary body.
"""

from __future__ import annotations

import io
import json
from functools import lru_cache
from importlib.resources import files
from typing import Any

import fastavro
from fastavro.schema import fingerprint, to_parsing_canonical_form

SCHEMA_RESOURCE = "produce_response.avsc"
SINGLE_OBJECT_MARKER = b"\xc3\x01"


def schema_text() -> str:
    """The response schema (Avro JSON) as shipped with the package."""
    return files("contract").joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def response_schema() -> Any:
    return fastavro.parse_schema(json.loads(schema_text()))


@lru_cache(maxsize=1)
def schema_fingerprint() -> bytes:
    return bytes.fromhex(fingerprint(to_parsing_canonical_form(response_schema()), "CRC-64-AVRO"))


def encode_response(response: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    buf.write(SINGLE_OBJECT_MARKER)
    buf.write(schema_fingerprint())
    fastavro.schemaless_writer(buf, response_schema(), response)
    return buf.getvalue()


def decode_response(data: bytes) -> dict[str, Any]:
    if data[:2] != SINGLE_OBJECT_MARKER:
        raise ValueError("not Avro single object encoding (missing C3 01 marker)")
    if data[2:10] != schema_fingerprint():
        raise ValueError(f"unknown schema fingerprint {data[2:10].hex()}")
    return fastavro.schemaless_reader(io.BytesIO(data[10:]), response_schema(), None)
