"""The produce response of one decision row, encoded (the schema and its reference encoder are
`contract.responses`). The bytes come from the C encoder `sinks/_response_avro.c` where it is built,
else from fastavro (one warning); tests/unit/test_response_avro_native.py holds both to the same bytes.
"""

from __future__ import annotations

import json
from typing import Any

from contract.decision_row import DecisionRow
from contract.responses import SINGLE_OBJECT_MARKER, encode_response, schema_fingerprint
from validators.native_modules import load_extension

NATIVE_RESPONSES = load_extension("sinks._response_avro", "fastavro encodes the produce responses (slower)")


def response_from_row(row: DecisionRow, log_start_offset: int | None = None) -> dict[str, Any]:
    """The produce response for one decision row; `log_start_offset` replaces the row's when given."""
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
        "log_start_offset": row.log_start_offset if log_start_offset is None else log_start_offset,
        "record_errors": json.loads(row.record_errors),
        "record_count": row.record_count,
        "ingress_partition": row.ingress_partition,
        "ingress_offset": row.ingress_offset,
    }


def encode_row_response(row: DecisionRow, log_start_offset: int | None = None) -> bytes:
    """`encode_response(response_from_row(row, log_start_offset))`, natively where built."""
    native = NATIVE_RESPONSES
    if native is None:
        return encode_response(response_from_row(row, log_start_offset))
    errors = () if row.record_errors == "[]" else [
        (e["batch_index"], e["message"]) for e in json.loads(row.record_errors)
    ]
    return native.encode(
        SINGLE_OBJECT_MARKER + schema_fingerprint(), row.request_id, row.client_id, row.topic, -1 if row.partition is None else row.partition,
        row.error_code, row.error_name, row.error_message, row.base_offset, row.log_append_time_ms,
        row.log_start_offset if log_start_offset is None else log_start_offset, errors, row.record_count,
        row.ingress_partition, row.ingress_offset,
    )
