"""`make bench`, the Kafka front door: a real librdkafka producer (confluent-kafka `Producer`, idempotent,
acks=all, linger.ms=5, no compression) producing the workload's records through the front door to a
running gateway query — the path any Kafka client takes when its bootstrap.servers is the front door.

Its anchor is the same producer, with the same records, to the bench's Apache Kafka broker (the
"kafka-anchor" topic). Per row: records/s = records delivered / (last delivery report - first
produce()); latency = produce() -> delivery report per message. The producer is kept saturated (a
closed loop bounded by librdkafka's queue.buffering.max.messages), so latency includes the time a
record waits in the producer's queue. MB/s counts the record-batch bytes of the same records in the
workload's batches (comparable with the rows above). Delivery errors, client errors and the front
door's log warnings are counted and printed, never asserted.

Alone: `.venv/bin/python -m tests.bench --quick --only front-door`.
"""

from __future__ import annotations

import logging
import time
from array import array
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from front_door.metrics import FrontDoorMetrics
from front_door.server import FrontDoor
from sinks.kafka_admin import create_topics
from sinks.registry_watcher import RegistryWatcher
from streaming.query import start_gateway, stop_gracefully, topic_specs
from tests.bench_stack import BENCH_TOPIC, KAFKA_VERSION, Row, Stack, Workload

LINGER_MS = 5
PRODUCER_CONFIG: dict[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": LINGER_MS,
    "compression.type": "none",
    # batch.size, batch.num.messages, max.in.flight (5 with idempotence), queue sizes: librdkafka's defaults
}
PRODUCER_NAME = f"librdkafka idempotent, linger {LINGER_MS} ms"  # fits the table's 58-character names
# processing-time triggers of the gateway query: the deployment default, and back-to-back micro-batches
FRONT_DOOR_TRIGGERS = ("1 second", "0 seconds")
# the front door, its ingress/response clients, and its asyncio loop (a handler's unretrieved exception)
WATCHED_LOGS = ("gateway.front_door", "gateway.kafka_client", "asyncio")


@dataclass
class Deliveries:
    """Per-message produce() and delivery-report times (perf_counter seconds) of one producer run."""

    sent: array
    delivered: array
    errors: list[str] = field(default_factory=list)  # delivery reports with an error
    client_errors: list[str] = field(default_factory=list)  # librdkafka's error_cb
    undelivered: int = 0  # no delivery report within the flush timeout
    unsent: int = 0  # not produced: the producer stalled

    def ok(self) -> list[int]:
        return [i for i in range(len(self.sent)) if self.delivered[i] > 0.0]


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name} {record.levelname}: {record.getMessage()}")


@contextmanager
def collected_warnings() -> Iterator[list[str]]:
    """WARNING and above of the front door's loggers while the block runs."""
    handler = _Collect()
    loggers = [logging.getLogger(name) for name in WATCHED_LOGS]
    for lg in loggers:
        lg.addHandler(handler)
    try:
        yield handler.lines
    finally:
        for lg in loggers:
            lg.removeHandler(handler)


@contextmanager
def gateway_with_front_door(stack: Stack, trigger: str) -> Iterator[tuple[str, Any]]:
    """A gateway query (processing-time trigger) on a fresh config of the stack, with a front door on a
    free port of loopback: (bootstrap address, query)."""
    assert stack.spark is not None
    config = stack.config("front-door", trigger_interval=trigger)
    create_topics(config.bootstrap_servers, topic_specs(config))
    query, _ = start_gateway(stack.spark, config)
    door = FrontDoor(config.front_door_settings(listen="127.0.0.1:0"), RegistryWatcher(config.path(config.topics_file)).current,
                     FrontDoorMetrics())
    try:
        door.start()
        assert door.address is not None
        yield f"{door.address.host}:{door.address.port}", query
    finally:
        door.stop()
        stop_gracefully(query)


def produce_records(bootstrap: str, topic: str, w: Workload, count: int, partitions: int,
                    stall_s: float = 60.0, flush_timeout_s: float = 300.0) -> Deliveries:
    """`count` records as the workload's batches hold them (record r of batch b: key `key-<r>`, partition
    b % partitions), produced one by one through a librdkafka producer; poll(0) after each produce().
    Gives up producing when the queue stays full with no delivery report for `stall_s` (a broken path
    would otherwise hold the bench for message.timeout.ms per queue-full of records)."""
    d = Deliveries(array("d", bytes(8 * count)), array("d", bytes(8 * count)))
    last_report = [time.perf_counter()]

    def report(i: int, err: KafkaError | None, _msg: Message) -> None:
        last_report[0] = time.perf_counter()
        if err is None:
            d.delivered[i] = last_report[0]
        else:
            d.errors.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG,
                         "error_cb": lambda err: d.client_errors.append(str(err))})
    value = b"v" * w.value_size
    keys = [b"key-%d" % r for r in range(w.records)]

    def send(i: int) -> bool:
        batch, r = divmod(i, w.records)
        while True:
            try:
                d.sent[i] = time.perf_counter()
                producer.produce(topic, value, keys[r], batch % partitions, on_delivery=partial(report, i))
                return True
            except BufferError:  # queue.buffering.max.messages reached: serve delivery reports
                producer.poll(0.05)
                if time.perf_counter() - last_report[0] > stall_s:
                    d.sent[i] = 0.0
                    return False

    for i in range(count):
        if not send(i):
            d.unsent = count - i
            d.client_errors.append(f"stalled: no delivery report for {stall_s:.0f} s; {d.unsent} records not produced")
            break
        producer.poll(0)
    d.undelivered = producer.flush(flush_timeout_s)
    if d.undelivered:
        producer.purge()
        producer.flush(0)  # serves the purged messages' delivery reports (errors)
    return d


def deliveries_row(name: str, w: Workload, d: Deliveries, note: str = "", micro_batch_s: list[float] | None = None) -> Row:
    ok = d.ok()
    batch = w.batches(1, 1, int(time.time() * 1000))[0][2]
    problems = (f"; {len(d.errors)} delivery errors, {len(d.client_errors)} client errors, "
                f"{d.undelivered} undelivered, {d.unsent} unsent" if d.errors or d.client_errors or d.undelivered
                else "")
    if not ok:
        return Row(name, note=f"nothing delivered{problems}")
    seconds = max(d.delivered[i] for i in ok) - d.sent[0]
    return Row(name, len(ok) / seconds, len(ok) * len(batch) / w.records / seconds / 1e6,
               [(d.delivered[i] - d.sent[i]) * 1000 for i in ok], micro_batch_s or [],
               note=f"{len(ok)}/{len(d.sent)} records{', ' + note if note else ''}{problems}")


def _report_problems(what: str, d: Deliveries, warnings: list[str]) -> None:
    if not (d.errors or d.client_errors or d.undelivered or warnings):
        return
    print(f"  {what}: {len(d.errors)} delivery errors, {len(d.client_errors)} client errors, "
          f"{d.undelivered} undelivered, {d.unsent} unsent, {len(warnings)} warnings logged")
    for line in (d.errors[:3] + d.client_errors[:3] + warnings[:5]):
        print(f"    {line}")


def front_door_rows(stack: Stack, w: Workload, records: int, triggers: Sequence[str], partitions: int = 4) -> list[Row]:
    """The same producer to Kafka, then through the front door to a running gateway query per trigger."""
    anchor = produce_records(stack.broker.bootstrap_servers, "kafka-anchor", w, records, partitions)
    _report_problems("Kafka anchor", anchor, [])
    rows = [deliveries_row(f"{KAFKA_VERSION}, {PRODUCER_NAME}", w, anchor, f"{w.name}, {partitions} partitions")]
    for trigger in triggers:
        with collected_warnings() as warnings, gateway_with_front_door(stack, trigger) as (bootstrap, query):
            d = produce_records(bootstrap, BENCH_TOPIC, w, records, partitions)
            durations = [p["durationMs"]["triggerExecution"] / 1000 for p in query.recentProgress
                         if p["numInputRows"] > 0]
        if query.exception() is not None:
            print(f"  gateway query failed: {query.exception()}")
        _report_problems(f"front door, trigger {trigger}", d, warnings)
        rows.append(deliveries_row(f"gateway via front door, {PRODUCER_NAME}", w, d,
                                   f"{w.name}, trigger {trigger}; p = produce()->delivery report", durations))
    return rows
