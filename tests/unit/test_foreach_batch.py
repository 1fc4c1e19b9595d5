"""The stage's sink work takes its micro-batch id from Spark's local property; outside a task of a streaming
micro-batch there is none, and asking fails with a message rather than appending under a wrong id."""

from __future__ import annotations

import pytest

from sinks.foreach_batch import BATCH_ID_PROPERTY, micro_batch_id


def test_outside_a_streaming_task_there_is_no_batch_id() -> None:
    assert BATCH_ID_PROPERTY == "streaming.sql.batchId"  # MicroBatchExecution.BATCH_ID_KEY
    with pytest.raises(RuntimeError, match="not in a task of a streaming micro-batch"):
        micro_batch_id()
