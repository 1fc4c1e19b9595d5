"""`make bench`, librdkafka (confluent-kafka `Producer`) as a bench client, and a running gateway with its
Kafka front door for any client to produce through.

- `produce_records`: `count` records of `value_size` bytes, no key, no partition (librdkafka's partitioner
  picks, as the Java client's does for ProducerPerformance), through one producer with the given
  settings, kept saturated: a closed loop bounded by queue.buffering.max.messages/kbytes, so a record's
  latency (produce() -> delivery report) includes its wait in the producer's queue. records/s = records
  delivered / (last delivery report - first produce()).
- `send_and_wait`: one record at a time, each produce() followed by flush() until its delivery report:
  a request's round trip, with nothing else in flight.
- `gateway_with_front_door`: a gateway query on a fresh config of the bench's stack with a front door on
  a free loopback port.

Delivery errors, client errors (error_cb), records never produced or never delivered, and the front
door's log warnings are counted and printed, never asserted. The rows and their settings are
`tests.bench_clients`'.
"""

from __future__ import annotations

import logging
import time
from array import array
from collections.abc import Iterator, Mapping
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
from tests.bench_round_trip import RoundTripProbe
from tests.bench_stack import Row, Stack

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
    unsent: int = 0  # not produced: the producer stalled, or the row's deadline passed

    def ok(self) -> list[int]:
        return [i for i in range(len(self.sent)) if self.delivered[i] > 0.0]

    def problems(self) -> list[str]:
        if not (self.errors or self.client_errors or self.undelivered or self.unsent):
            return []
        return [f"{len(self.errors)} delivery errors, {len(self.client_errors)} client errors, "
                f"{self.undelivered} undelivered, {self.unsent} unsent", *self.errors[:3], *self.client_errors[:3]]


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
def gateway_with_front_door(stack: Stack, probe: RoundTripProbe | None = None,
                            **overrides: Any) -> Iterator[tuple[str, Any]]:
    """A gateway query on a fresh config of the stack (its defaults, `overrides` applied), with a front door
    on a free port of loopback: (bootstrap address, query). `probe` records the front door's hops and the
    sink's micro-batches."""
    assert stack.spark is not None
    config = stack.config("front-door", **overrides)
    create_topics(config.bootstrap_servers, topic_specs(config))
    query, _ = start_gateway(stack.spark, config, observers=[probe.observe] if probe else ())
    try:
        door = FrontDoor(config.front_door_settings(listen="127.0.0.1:0"),
                         RegistryWatcher(config.path(config.topics_file)).current,
                         probe.door if probe else FrontDoorMetrics())
        try:
            door.start()
            assert door.address is not None
            yield f"{door.address.host}:{door.address.port}", query
        finally:
            door.stop()
    finally:
        stop_gracefully(query)


def _producer(bootstrap: str, config: Mapping[str, str], d: Deliveries) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, **config, "error_cb": lambda err: d.client_errors.append(str(err))})


def produce_records(bootstrap: str, topic: str, config: Mapping[str, str], count: int, value_size: int,
                    deadline_s: float, stall_s: float = 60.0) -> Deliveries:
    """`count` records of `value_size` bytes, no key, produced one by one through a librdkafka producer
    with `config`; poll(0) after each produce(). Stops producing when the queue stays full with no delivery
    report for `stall_s` (a broken path would otherwise hold the bench for message.timeout.ms per queue-full
    of records) or when `deadline_s` has passed; waits for the last reports at most until the deadline
    (10 s at least), then purges what is left."""
    d = Deliveries(array("d", bytes(8 * count)), array("d", bytes(8 * count)))
    last_report = [time.perf_counter()]
    deadline = time.perf_counter() + deadline_s

    def report(i: int, err: KafkaError | None, _msg: Message) -> None:
        last_report[0] = time.perf_counter()
        if err is None:
            d.delivered[i] = last_report[0]
        else:
            d.errors.append(str(err))

    producer = _producer(bootstrap, config, d)
    value = b"v" * value_size

    def send(i: int) -> bool:
        while True:
            try:
                d.sent[i] = time.perf_counter()
                producer.produce(topic, value, on_delivery=partial(report, i))
                return True
            except BufferError:  # the queue's bound reached: serve delivery reports
                producer.poll(0.05)
                now = time.perf_counter()
                if now - last_report[0] > stall_s or now > deadline:
                    d.sent[i] = 0.0
                    return False

    for i in range(count):
        if not send(i) or (i % 1024 == 0 and time.perf_counter() > deadline):
            d.unsent = count - i - (1 if d.sent[i] else 0)
            d.client_errors.append(f"gave up producing after {time.perf_counter() - d.sent[0]:.0f} s "
                                   f"({d.unsent} records not produced)")
            break
        producer.poll(0)
    _finish(producer, d, max(10.0, deadline - time.perf_counter()))
    return d


def send_and_wait(bootstrap: str, topic: str, config: Mapping[str, str], count: int, value_size: int,
                  deadline_s: float, request_timeout_s: float = 30.0) -> Deliveries:
    """`count` records one at a time: produce(), then flush() until its delivery report, then the next.
    Stops at the first record not delivered within `request_timeout_s` or at `deadline_s`."""
    d = Deliveries(array("d", bytes(8 * count)), array("d", bytes(8 * count)))
    producer = _producer(bootstrap, config, d)
    value = b"v" * value_size
    deadline = time.perf_counter() + deadline_s

    def report(i: int, err: KafkaError | None, _msg: Message) -> None:
        if err is None:
            d.delivered[i] = time.perf_counter()
        else:
            d.errors.append(str(err))

    for i in range(count):
        if time.perf_counter() > deadline:
            d.unsent = count - i
            break
        d.sent[i] = time.perf_counter()
        producer.produce(topic, value, on_delivery=partial(report, i))
        if producer.flush(request_timeout_s) != 0:
            d.unsent = count - i - 1
            break
    _finish(producer, d, 10.0)
    return d


def _finish(producer: Producer, d: Deliveries, timeout_s: float) -> None:
    d.undelivered = producer.flush(timeout_s)
    if d.undelivered:
        producer.purge()
        producer.flush(0)  # serves the purged messages' delivery reports (errors)


def deliveries_row(name: str, d: Deliveries, value_size: int, note: str = "",
                   micro_batch_s: list[float] | None = None) -> Row:
    """records/s over first produce() -> last delivery report; MB/s of record values (10^6 B)."""
    ok = d.ok()
    problems = "; " + d.problems()[0] if d.problems() else ""
    if not ok:
        return Row(name, note=f"nothing delivered{problems}")
    seconds = max(d.delivered[i] for i in ok) - d.sent[0]
    return Row(name, len(ok) / seconds, len(ok) * value_size / seconds / 1e6,
               [(d.delivered[i] - d.sent[i]) * 1000 for i in ok], micro_batch_s or [],
               note=f"{len(ok)}/{len(d.sent)} records{', ' + note if note else ''}{problems}")
