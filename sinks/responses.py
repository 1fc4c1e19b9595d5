"""Produce responses (DESIGN §4.3): Avro in single object encoding, keyed by request id.

Single object encoding (Avro spec): marker C3 01, the schema's 8-byte CRC-64-AVRO fingerprint
(little-endian, as Java's SchemaNormalization writes it), then the binary body.
"""

from __future__ import annotations

import io
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import fastavro
from fastavro.schema import fingerprint, to_parsing_canonical_form

from contract.decision_row import DecisionRow

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "conf" / "schemas" / "produce_response.avsc"
SINGLE_OBJECT_MARKER = b"\xc3\x01"


@lru_cache(maxsize=1)
def response_schema() -> Any:
    return fastavro.parse_schema(json.loads(SCHEMA_PATH.read_text()))


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


def response_from_row(row: DecisionRow) -> dict[str, Any]:
    """The produce response for one decision row."""
    return {
        "request_id": row.request_id,
        "client_id": row.client_id,
        "topic": row.topic,
        "partition": -1 if row.partition is None else row.partition,
        "error_code": row.error_code,
        "error_name": row.error_name,
        "error_message": row.error_message,
        "base_offset": row.base_offset,
        "log_append_time_ms": row.log_append_time_ms,
        "log_start_offset": row.log_start_offset,
        "record_errors": json.loads(row.record_errors),
        "record_count": row.record_count,
        "ingress_partition": row.ingress_partition,
        "ingress_offset": row.ingress_offset,
    }
