"""The topic registry is reloaded while the query runs: a new topic is served from the next
micro-batch; a bad file keeps the previous registry (and the query keeps running)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from contract.responses import decode_response
from streaming.query import start_gateway, stop_gracefully
from tests.integration.gateway_io import create_gateway_topics, produce_batches
from validators.codec.record_batch import build_record_batch

pytestmark = pytest.mark.integration


def _await_response(consumer: Consumer, request_id: str, timeout_s: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            r = decode_response(m.value())
            if r["request_id"] == request_id:
                return r
    raise AssertionError(f"no response for {request_id} within {timeout_s} s")


def _rewrite(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)  # atomic: the gateway never reads a half-written file


def test_registry_reload_applies_while_running_and_bad_reload_keeps_old(spark, gateway_config) -> None:
    config = gateway_config
    create_gateway_topics(config)
    topics_file = Path(config.topics_file)
    registry = json.loads(topics_file.read_text())
    batch = build_record_batch([(int(time.time() * 1000), b"k", b"v")])
    consumer = Consumer({"bootstrap.servers": config.bootstrap_servers, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([config.response_topic])
    query, _ = start_gateway(spark, config.with_overrides(trigger_interval="500 milliseconds"))
    try:
        [before] = produce_batches(config, [("added", 0, batch)])
        assert _await_response(consumer, before.request_id)["error_name"] == "UNKNOWN_TOPIC_OR_PARTITION"

        registry["topics"]["added"] = {"partitions": 1, "configs": {"message.timestamp.type": "LogAppendTime"}}
        _rewrite(topics_file, json.dumps(registry))
        [after] = produce_batches(config, [("added", 0, batch)])
        accepted = _await_response(consumer, after.request_id)
        assert (accepted["error_code"], accepted["base_offset"]) == (0, 0)
        assert accepted["log_append_time_ms"] > 0

        _rewrite(topics_file, '{"topics": {"added": {"partitions": "many"}}}')  # invalid: kept out
        [still] = produce_batches(config, [("added", 0, batch)])
        kept = _await_response(consumer, still.request_id)
        assert (kept["error_code"], kept["base_offset"]) == (0, 1)
        assert query.isActive and query.exception() is None
    finally:
        consumer.close()
        stop_gracefully(query)
