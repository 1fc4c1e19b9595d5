"""`make run`'s demo summary on a real broker: it counts every response sent after it starts, the first one
too however soon it comes (its line times `make run`'s first response), and none sent before."""

from __future__ import annotations

import threading
from pathlib import Path

from confluent_kafka import Producer

from embedded.demo import LiveSummary
from sinks.responses import encode_row_response
from streaming.config import GatewayConfig
from tests.decision_rows import decision_row
from tests.integration.gateway_io import create_gateway_topics


def test_a_response_sent_right_after_the_summary_starts_is_its_first(gateway_config: GatewayConfig,
                                                                     tmp_path: Path) -> None:
    create_gateway_topics(gateway_config)
    producer = Producer(gateway_config.cluster.client({}))
    before = encode_row_response(decision_row(request_id="before"))
    producer.produce(gateway_config.response_topic, value=before, partition=0)
    assert producer.flush(30) == 0
    first = threading.Event()
    summary = LiveSummary(gateway_config.cluster, gateway_config.response_topic, tmp_path, every_s=3600,
                          on_first_response=first.set)
    summary.start()
    try:
        rejected = encode_row_response(decision_row(request_id="after", error_code=87, error_name="INVALID_RECORD",
                                                    error_message="bad", base_offset=-1, last_offset=-1))
        producer.produce(gateway_config.response_topic, value=rejected, partition=0)
        assert producer.flush(30) == 0
        assert first.wait(60), "the response sent just after the summary started was not read"
    finally:
        summary.stop()
        summary.join(30)
    assert summary.outcomes == {"INVALID_RECORD": 1}  # the one sent after; the one before is not counted
