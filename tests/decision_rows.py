"""Decision rows for tests: a complete `contract.decision_row.DecisionRow` of an appended batch, any
field overridden."""

from __future__ import annotations

import json
from typing import Any

from contract.decision_row import DecisionRow

NOW = 1_700_000_000_000


def decision_row(**overrides: Any) -> DecisionRow:
    """`record_error_count`, unless given, is the length of the `record_errors` list (a list not cut)."""
    base: dict[str, Any] = dict(
        ingress_partition=0, ingress_offset=0, ingress_timestamp_ms=NOW - 200, request_id="req-0", client_id=None,
        acks=1, topic="ct", partition=0, partition_header="0", replay_of=None, error_code=0, error_name=None,
        error_message=None, record_errors="[]", base_offset=0, last_offset=2, log_append_time_ms=-1,
        append_time_ms=NOW, max_timestamp=NOW - 1000, producer_max_timestamp=NOW - 1000, log_start_offset=0,
        record_count=3, clock_held=False, duplicate=False, future_timestamps=0, window=None, batch_time_ms=NOW,
        batch=b"x" * 100,
    )
    fields = {**base, **overrides}
    fields.setdefault("record_error_count", len(json.loads(fields["record_errors"])))
    return DecisionRow(**fields)
