"""librdkafka's lines through `KAFKA_CLIENT_LOG`: the ones known to be harmless at DEBUG, every other at its own
level, each repeated line once per window (kafka_cluster/client_log.py)."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import Producer

from embedded.local_kafka import free_port
from kafka_cluster.client_log import KAFKA_CLIENT_LOG, RepeatedLines


def librdkafka_line(level: int, facility: str, message: str) -> None:
    """A line as confluent-kafka hands it over: log(level, "%s [%s] %s", facility, client name, message)."""
    KAFKA_CLIENT_LOG.log(level, "%s [%s] %s", facility, "rdkafka#producer-8", message)


GETPID = ("[thrd:main]: Failed to acquire idempotence PID from broker 127.0.0.1:9092/1: Broker: Coordinator load "
          "in progress: retrying")
PURGE = "[thrd:app]: Purging 1 unserved events from background queue"
REFUSED = "[thrd:127.0.0.1:9092/1]: 127.0.0.1:9092/1: Connect to ipv4#127.0.0.1:9092 failed: Connection refused"


def test_known_harmless_lines_are_hidden_at_info(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=KAFKA_CLIENT_LOG.name):
        librdkafka_line(logging.WARNING, "GETPID", GETPID)
        librdkafka_line(logging.INFO, "BGQUEUE", PURGE)
        librdkafka_line(logging.ERROR, "FAIL", REFUSED)  # a cluster that refuses connections is news
        librdkafka_line(logging.WARNING, "GETPID", "[thrd:main]: Failed to acquire idempotence PID: Broker: "
                        "Cluster authorization failed")  # the same facility, another cause
    assert [(r.levelno, r.args[0]) for r in caplog.records] == [(logging.ERROR, "FAIL"), (logging.WARNING, "GETPID")]


def test_known_harmless_lines_are_shown_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger=KAFKA_CLIENT_LOG.name):
        librdkafka_line(logging.WARNING, "GETPID", GETPID)
        librdkafka_line(logging.INFO, "BGQUEUE", PURGE)
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("DEBUG", f"GETPID [rdkafka#producer-8] {GETPID}"), ("DEBUG", f"BGQUEUE [rdkafka#producer-8] {PURGE}")]


def test_a_real_client_hands_its_lines_over_in_the_form_the_filter_reads(caplog: pytest.LogCaptureFixture) -> None:
    """librdkafka against a port nobody listens on: its refusals come through at their own level."""
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{free_port()}", "logger": KAFKA_CLIENT_LOG,
                         "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 100})
    with caplog.at_level(logging.INFO, logger=KAFKA_CLIENT_LOG.name):
        deadline = time.monotonic() + 30
        while not caplog.records and time.monotonic() < deadline:
            producer.poll(0.2)  # serves the client's log queue: its lines are logged on this thread
    assert caplog.records, "librdkafka logged nothing about a port that refuses connections"
    record = caplog.records[0]
    facility, client, message = record.args
    assert record.levelno >= logging.WARNING and client.startswith("rdkafka#producer-")
    assert facility.isupper() and "Connection refused" in caplog.text, caplog.text


def _record(client: str, message: str) -> logging.LogRecord:
    return logging.LogRecord(KAFKA_CLIENT_LOG.name, logging.ERROR, __file__, 1, "%s [%s] %s", ("FAIL", client, message),
                             None)


def test_a_repeated_line_is_shown_once_a_window_and_then_says_how_many_were_left_out() -> None:
    now = [100.0]
    lines = RepeatedLines(window_s=30.0, clock=lambda: now[0])
    shown = []
    for i in range(250):  # a cluster gone: an attempt every 100 ms, librdkafka's timing in each line
        now[0] = 100.0 + i * 0.1
        record = _record("rdkafka#producer-1", REFUSED + f" (after {i % 3}ms in state CONNECT)")
        if lines.filter(record):
            shown.append(record.getMessage())
    assert len(shown) == 1, shown  # 25 s of attempts: the first only
    now[0] = 131.0
    later = _record("rdkafka#producer-1", REFUSED + " (after 0ms in state CONNECT)")
    assert lines.filter(later)
    assert later.getMessage().endswith("(249 more like it not logged in the last 30s)"), later.getMessage()
    now[0] = 132.0
    assert not lines.filter(_record("rdkafka#producer-1", REFUSED))  # a new window began at 131 s


def test_lines_of_other_clients_and_other_messages_are_shown_at_once() -> None:
    lines = RepeatedLines(window_s=30.0, clock=lambda: 5.0)
    assert lines.filter(_record("rdkafka#producer-1", REFUSED))
    assert lines.filter(_record("rdkafka#consumer-2", REFUSED))
    assert lines.filter(_record("rdkafka#producer-1", REFUSED.replace("9092", "9093")))
    assert not lines.filter(_record("rdkafka#producer-1", REFUSED))
    assert lines.filter(logging.LogRecord("x", logging.ERROR, __file__, 1, "not librdkafka's", (), None))
