"""The produce response of one decision row (the encoding is `contract.responses`)."""

from __future__ import annotations

import json
from typing import Any

from contract.decision_row import DecisionRow


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
