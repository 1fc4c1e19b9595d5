"""Steady idempotent producers of three real clients, each in a process of its own and read through the same
JSON lines: librdkafka (this module run as a program), the Java client (`java/SteadyProducer.java`) and
franz-go (`go/steady_producer`, `make go` builds it). Each sends `<prefix>-NNNNNN` to partition N % partitions
every few milliseconds until stopped, and prints one line per acknowledgement with the wall-clock times of the
send and the acknowledgement (see the Java source for the lines).

The processes run at Linux's idle priority (SCHED_IDLE): they stand for clients on hosts of their own. On these
two shared cores a client's own CPU would otherwise slow the gateway it waits for: librdkafka's idempotent
producer busy-polls while a partition's requests wait (docs/clients.md), which is all of a failover. `stop()`
gives every thread of the process the normal priority back first: at idle priority beside busy cores a client's
final flush can be starved of CPU for minutes, and the flush is not what a test measures.

As a program: python -m tests.integration.steady_producers BOOTSTRAP TOPIC PREFIX PARTITIONS INTERVAL_MS
FLUSH_TIMEOUT_MS [key=value librdkafka settings...]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from embedded.local_kafka import KAFKA_JARS_DIR, java_executable, kafka_classpath, tail_lines
from tests.jvm_threads import cpu_seconds

JAVA_SOURCE = Path(__file__).parent / "java" / "SteadyProducer.java"
GO_PROGRAM = Path(__file__).parent / "go" / "bin" / "steady_producer"
INTERVAL_MS = 15  # one record per client every 15 ms: ~67 a second
FLUSH_TIMEOUT_MS = 120_000


class SteadyProducer:
    """A steady producer process; `acked` (value -> (sent, acknowledged), wall-clock seconds), `errors`, and
    after `stop()`, `sent` (every value it sent, in order)."""

    def __init__(self, name: str, prefix: str, cmd: Sequence[str], log_path: Path | None = None,
                 idle: bool = True) -> None:
        self.name, self.prefix, self.log_path = name, prefix, log_path
        self.acked: dict[str, tuple[float, float]] = {}
        self.errors: list[str] = []
        self.sent: list[str] = []
        self._closed = threading.Event()
        stderr = open(log_path, "ab") if log_path is not None else subprocess.DEVNULL  # noqa: SIM115 - the child's
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                     preexec_fn=_idle_priority if idle else None)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not line.startswith("{"):
                continue
            event: dict[str, Any] = json.loads(line)
            if event["event"] == "acked":
                self.acked[event["value"]] = (event["sent_ms"] / 1000, event["acked_ms"] / 1000)
            elif event["event"] == "error":
                self.errors.append(f"{event['value']}: {event['message']}")
            elif event["event"] == "closed":
                self.sent = [f"{self.prefix}-{i:06d}" for i in range(event["sent"])]
                self._closed.set()

    def stop(self, timeout_s: float) -> list[str]:
        """Stops sending and waits for what is in flight; the values sent and never acknowledged."""
        assert self.proc.stdin is not None
        _normal_priority(self.proc.pid)
        self.proc.stdin.write("stop\n")
        self.proc.stdin.flush()
        assert self._closed.wait(timeout_s + 30), (
            f"{self.name} did not close: exit {self.proc.poll()}, {len(self.acked)} acknowledged, "
            f"errors {self.errors[-3:]}; its threads: {_thread_states(self.proc.pid)}"
            + ("" if self.log_path is None else f"; the last lines of {self.log_path}:\n{tail_lines(self.log_path, 30)}"))
        self.proc.wait(30)
        self._reader.join(30)
        return [v for v in self.sent if v not in self.acked]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def first_ack_after(self, moment: float) -> float:
        """Seconds from `moment` (time.time()) to the first acknowledgement of a record sent after it."""
        return min(acked for sent, acked in list(self.acked.values()) if sent > moment) - moment

    def p99_round_trip_ms(self, start: float, end: float) -> float:
        """The 99th percentile of the round trips of the records sent between `start` and `end`."""
        trips = [(acked - sent) * 1000 for sent, acked in list(self.acked.values()) if start <= sent < end]
        return round(statistics.quantiles(trips, n=100)[98], 1) if len(trips) >= 2 else float("nan")


def _idle_priority() -> None:
    """In the child before it runs: Linux's SCHED_IDLE, CPU only when nothing else wants it."""
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def _normal_priority(pid: int) -> None:
    """Every thread of process `pid` back to Linux's normal policy (a policy is a thread's, not a process's)."""
    for tid in _threads(pid):
        try:
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        except ProcessLookupError:  # the thread ended meanwhile
            pass


def _threads(pid: int) -> list[int]:
    try:
        return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except FileNotFoundError:  # the process has gone
        return []


def _thread_states(pid: int) -> str:
    """Each thread's name, state and CPU seconds (user + system), from /proc: what a stuck client was doing."""
    states = []
    for tid in _threads(pid):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except FileNotFoundError:
            continue
        name, state = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()[0]
        states.append(f"{name} {state} {cpu_seconds(stat):.1f}s")
    return ", ".join(states) or "none"


def librdkafka_producer(bootstrap: str, topic: str, prefix: str, partitions: int, log_path: Path | None = None,
                        **settings: object) -> SteadyProducer:
    """`log_path`: librdkafka's log lines (with its `debug` contexts of `settings`) go there."""
    return SteadyProducer("librdkafka", prefix, [
        sys.executable, "-m", "tests.integration.steady_producers", bootstrap, topic, prefix, str(partitions),
        str(INTERVAL_MS), str(FLUSH_TIMEOUT_MS), *(f"{k}={v}" for k, v in settings.items())], log_path)


def java_producer(classes: Path, bootstrap: str, topic: str, prefix: str, partitions: int, idle: bool = True,
                  **settings: object) -> SteadyProducer:
    """`classes`: JAVA_SOURCE compiled (`group_members.compile_java_client`); `idle`: at idle priority (not for
    a test of what the client does on time, such as renewing a session)."""
    return SteadyProducer("java", prefix, [
        java_executable(), "-Xmx256m", "-cp", f"{classes}:{kafka_classpath(KAFKA_JARS_DIR)}", "SteadyProducer",
        bootstrap, topic, prefix, str(partitions), str(INTERVAL_MS), str(FLUSH_TIMEOUT_MS),
        *(f"{k}={v}" for k, v in settings.items())], idle=idle)


def franz_go_producer(bootstrap: str, topic: str, prefix: str, partitions: int,
                      metadata_max_age_ms: int | None = None) -> SteadyProducer:
    assert GO_PROGRAM.exists(), f"{GO_PROGRAM} is missing: `make go` builds it"
    return SteadyProducer("franz-go", prefix, [
        str(GO_PROGRAM), bootstrap, topic, prefix, str(partitions), str(INTERVAL_MS), str(FLUSH_TIMEOUT_MS),
        *([] if metadata_max_age_ms is None else [str(metadata_max_age_ms)])])


def _emit(event: dict[str, Any]) -> None:
    print(json.dumps(event), flush=True)


def main(argv: Sequence[str]) -> None:
    """librdkafka's steady producer (the module docstring's program)."""
    from confluent_kafka import KafkaError, Message, Producer

    bootstrap, topic, prefix, partitions, interval_ms, flush_timeout_ms, *settings = argv
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "logger": _Stderr(), **dict(s.split("=", 1) for s in settings)})
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()

    def report(sent_ms: int) -> Any:
        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            value = bytes(msg.value()).decode()
            if err is None:
                _emit({"event": "acked", "value": value, "sent_ms": sent_ms, "acked_ms": int(time.time() * 1000)})
            else:
                _emit({"event": "error", "value": value, "message": str(err)})
        return on_delivery

    sent, due = 0, time.monotonic()
    while not stop.is_set():
        producer.produce(topic, value=f"{prefix}-{sent:06d}".encode(), partition=sent % int(partitions),
                         on_delivery=report(int(time.time() * 1000)))
        sent += 1
        due += int(interval_ms) / 1000
        while (left := due - time.monotonic()) > 0:
            producer.poll(left)  # serves delivery reports until the next record is due
    producer.flush(int(flush_timeout_ms) / 1000)
    _emit({"event": "closed", "sent": sent})


class _Stderr:
    """librdkafka's log lines, with the wall-clock time, on stderr (which the test keeps in a file)."""

    def log(self, _level: int, fmt: str, *args: object) -> None:
        print(f"{time.strftime('%H:%M:%S')}.{int(time.time() * 1000) % 1000:03d} {fmt % args if args else fmt}",
              file=sys.stderr, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
