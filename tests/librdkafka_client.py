"""`make bench`, librdkafka (confluent-kafka `Producer`) as a bench client, run as a user runs it: in a
process of its own (`run_in_own_process`), so its Python loop does not share the bench process's GIL with
the front door and the driver it measures.

- `produce_records`: `count` records of `value_size` bytes, no key, no partition (librdkafka's partitioner
  picks, as the Java client's does for ProducerPerformance), through one producer with the given
  settings, kept saturated: a closed loop bounded by queue.buffering.max.messages/kbytes, so a record's
  latency (produce() -> delivery report) includes its wait in the producer's queue. records/s = records
  delivered / (last delivery report - first produce()).
- `send_and_wait`: one record at a time, each produce() followed by flush() until its delivery report:
  a request's round trip, with nothing else in flight.
- `produce_spread`: records at a fixed rate, record i to partition i % `partitions` (a load spread over every
  partition, as many keyed producers make it), whatever the delivery reports.

Delivery errors, client errors (error_cb), records never produced or never delivered are counted in the
`Deliveries`, never raised. `python -m tests.librdkafka_client MODE ARGS_JSON OUT_DIR` runs one of them and
writes its `Deliveries` to OUT_DIR (times as raw doubles of the child's perf_counter: only differences
are read).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from array import array
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer

MODES = ("produce", "send-and-wait", "spread")
_TIMES = ("sent", "delivered")
_COUNTS = "deliveries.json"


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

    def save(self, out: Path) -> None:
        for name in _TIMES:
            (out / f"{name}.f64").write_bytes(getattr(self, name).tobytes())
        counts = {k: v for k, v in asdict(self).items() if k not in _TIMES}
        (out / _COUNTS).write_text(json.dumps(counts))

    @classmethod
    def load(cls, out: Path) -> Deliveries:
        times = {}
        for name in _TIMES:
            times[name] = array("d")
            times[name].frombytes((out / f"{name}.f64").read_bytes())
        return cls(**times, **json.loads((out / _COUNTS).read_text()))


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


def produce_spread(bootstrap: str, topic: str, config: Mapping[str, str], count: int, value_size: int,
                   deadline_s: float, rate: float, partitions: int) -> Deliveries:
    """`count` records at `rate` records/s, record i to partition i % `partitions`; a record the full queue
    refuses is counted unsent. Stops producing at `deadline_s`; then waits for the last reports (10 s at least)."""
    d = Deliveries(array("d", bytes(8 * count)), array("d", bytes(8 * count)))
    producer = _producer(bootstrap, config, d)
    value = b"v" * value_size
    start = time.perf_counter()
    deadline = start + deadline_s

    def report(i: int, err: KafkaError | None, _msg: Message) -> None:
        if err is None:
            d.delivered[i] = time.perf_counter()
        else:
            d.errors.append(str(err))

    for i in range(count):
        due = start + i / rate
        while (now := time.perf_counter()) < due:
            _wait(producer, due - now)
        if now > deadline:
            d.unsent += count - i
            break
        d.sent[i] = now
        try:
            producer.produce(topic, value, partition=i % partitions, on_delivery=partial(report, i))
        except BufferError:
            d.sent[i] = 0.0
            d.unsent += 1
        producer.poll(0)
    _finish(producer, d, max(10.0, deadline - time.perf_counter()))
    return d


def _wait(producer: Producer, seconds: float) -> None:
    """Until the next record is due, serving delivery reports meanwhile. `poll` counts its timeout in whole
    milliseconds (cut down, so a wait under 1 ms polls without waiting); a shorter wait sleeps. Polling the
    sub-millisecond waits spun a core: at 2 000 records/s the load's own process took ~0.6 of the machine's
    two cores from what it measures."""
    if seconds >= 0.001:
        producer.poll(min(seconds, 0.01))
    else:
        time.sleep(seconds)


def _finish(producer: Producer, d: Deliveries, timeout_s: float) -> None:
    d.undelivered = producer.flush(timeout_s)
    if d.undelivered:
        producer.purge()
        producer.flush(0)  # serves the purged messages' delivery reports (errors)


def run_in_own_process(mode: str, out: Path, bootstrap: str, topic: str, config: Mapping[str, str],
                       count: int, value_size: int, deadline_s: float, **extra: float) -> Deliveries:
    """`produce_records` or `send_and_wait` (`mode`) in a child interpreter, its `Deliveries` read back
    from `out`. A child that dies or overruns its deadline by a minute is reported as an error."""
    out.mkdir(parents=True, exist_ok=True)
    args = {"bootstrap": bootstrap, "topic": topic, "config": dict(config), "count": count,
            "value_size": value_size, "deadline_s": deadline_s, **extra}
    try:
        done = subprocess.run([sys.executable, "-m", __name__, mode, json.dumps(args), str(out)],
                              capture_output=True, text=True, timeout=deadline_s + 60.0, check=False)
    except subprocess.TimeoutExpired:
        return _failed(count, f"the producer process ran past its deadline ({deadline_s:.0f} s + 60 s)")
    if done.returncode != 0 or not (out / _COUNTS).exists():
        return _failed(count, f"the producer process exited {done.returncode}: {done.stderr.strip()[-300:]}")
    return Deliveries.load(out)


def _failed(count: int, why: str) -> Deliveries:
    return Deliveries(array("d", bytes(8 * count)), array("d", bytes(8 * count)), client_errors=[why], unsent=count)


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in MODES:
        print(f"usage: python -m {__name__} {{{'|'.join(MODES)}}} ARGS_JSON OUT_DIR", file=sys.stderr)
        return 2
    mode, args, out = argv[0], json.loads(argv[1]), Path(argv[2])
    common = (args["bootstrap"], args["topic"], args["config"], args["count"], args["value_size"], args["deadline_s"])
    if mode == "spread":
        produce_spread(*common, rate=args["rate"], partitions=int(args["partitions"])).save(out)
    else:
        (send_and_wait if mode == "send-and-wait" else produce_records)(*common).save(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
