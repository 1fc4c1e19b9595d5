"""`make soak`: the gateway for hours under steady load, sampled, with a report of growth per hour.

Run: `make soak` (`SOAK_MINUTES=120` by default) or `.venv/bin/python -m tests.soak --minutes 120`.

What runs, as an operator runs it: a local Apache Kafka broker, then the gateway's driver
(`python -m streaming run --config <work>/gateway.json`, the default `local[*,4]` master and settings) with
the demo topics and a `soak` topic (4 partitions, LogAppendTime, 4 MiB segments, retention.ms 10 min so
retention deletes segments all along; retention checked every 30 s). Load:
- through the front door: an idempotent librdkafka producer, `--door-rate` records/s (default 2 000) of
  200 B, round trip (send -> delivery report) kept per record;
- on the ingress topic: the demo's raw batches (`embedded.demo.DemoTraffic`, 5 a second, a trickle of
  them rejected and dead-lettered).

Every `--interval` seconds (default 30) a sample: RSS of the driver's Python, of its Spark JVM and of the
Python workers; the JVM's heap used and committed, old generation and metaspace (`jstat -gc`), threads and
open files of the driver and of the JVM; the state store's memory and rows (the gateway's own metrics);
the checkpoint's files and bytes; segment files; records delivered and the round trip's p50/p99 in the
interval. The report (`<work>/soak-report.md` and `.json`, also printed) gives, per series, the first and
last value, the range, the growth per hour over the run after a warm-up (the first 10 %, at least
5 minutes) and over its last half, and each half's peak: a series has levelled off when its last half
peaks no higher than the half before it (a sawtooth's endpoints can show growth it does not have).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer
from prometheus_client.parser import text_string_to_metric_families

from embedded.demo import DemoTraffic
from embedded.local_kafka import LocalKafka, free_port
from kafka_cluster.admin import create_topics
from streaming.config import REPO_ROOT, GatewayConfig
from streaming.query import topic_specs

SOAK_TOPIC = "soak"
SOAK_PARTITIONS = 4
RECORD_SIZE = 200


class DoorLoad:
    """A steady rate of records through the front door, with each record's round trip."""

    def __init__(self, bootstrap: str, rate: int) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
        self.rate = rate
        self.delivered = 0
        self.errors: list[str] = []
        self._latencies: list[float] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-door", daemon=True)
        self._thread.start()

    def _report(self, sent: float, err: KafkaError | None, _msg: Message) -> None:
        with self._lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.delivered += 1
                self._latencies.append(time.monotonic() - sent)

    def _run(self) -> None:
        value = b"x" * RECORD_SIZE
        per_tick = max(1, self.rate // 100)  # 100 sends a second, each of rate/100 records
        next_tick = time.monotonic()
        i = 0
        while not self._stop.is_set():
            now = time.monotonic()
            for _ in range(per_tick):
                self.producer.produce(SOAK_TOPIC, value=value, partition=i % SOAK_PARTITIONS,
                                      on_delivery=lambda err, msg, t=now: self._report(t, err, msg))
                i += 1
            self.producer.poll(0)
            next_tick += 0.01
            self._stop.wait(max(0.0, next_tick - time.monotonic()))

    def take_latencies(self) -> list[float]:
        with self._lock:
            taken, self._latencies = self._latencies, []
        return taken

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(10)
        return self.producer.flush(60)


def _children(pid: int) -> list[int]:
    """Every descendant of `pid` (from /proc's parent links)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        found += kids
        frontier += kids
    return found


def _status(pid: int, key: str) -> int:
    """A /proc/<pid>/status field (VmRSS in kB, Threads); 0 when the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _jstat(pid: int) -> dict[str, float]:
    """`jstat -gc`: capacities and usage in KB by column name (S0C ... MU ...)."""
    out = subprocess.run(["jstat", "-gc", str(pid)], capture_output=True, text=True, timeout=30).stdout.split("\n")
    if len(out) < 2:
        return {}
    return {k: float(v) for k, v in zip(out[0].split(), out[1].split(), strict=False) if re.match(r"^[\d.]+$", v)}


def _heap_range(pid: int) -> tuple[int, int] | None:
    """The Java heap's reserved address range (`jcmd GC.heap_info`: "garbage-first heap ... [0x.., 0x..)")."""
    out = subprocess.run(["jcmd", str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=30).stdout
    m = re.search(r"heap\s+total.*\[(0x[0-9a-f]+), (0x[0-9a-f]+)\)", out)
    return (int(m.group(1), 16), int(m.group(2), 16)) if m else None


def _rss_outside(pid: int, excluded: tuple[int, int]) -> float:
    """MB of the process's resident memory outside an address range (/proc/<pid>/smaps): for the JVM
    outside its heap, what native memory, thread stacks, code and metaspace hold."""
    kb, inside = 0, False
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                head = line.split(" ", 1)[0]
                if "-" in head and not line.startswith(("Rss", "Size")):
                    try:
                        start = int(head.split("-")[0], 16)
                        inside = excluded[0] <= start < excluded[1]
                        continue
                    except ValueError:
                        pass
                if line.startswith("Rss:") and not inside:
                    kb += int(line.split()[1])
    except OSError:
        return 0.0
    return kb / 1024


def _gateway_metrics(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in ("gateway_state_memory_bytes", "gateway_state_rows"):
                values[s.name] = values.get(s.name, 0.0) + s.value
    return values


def _tree(root: Path) -> tuple[int, int]:
    files = size = 0
    for dirpath, _, names in os.walk(root):
        for n in names:
            files += 1
            try:
                size += os.path.getsize(os.path.join(dirpath, n))
            except OSError:
                pass
    return files, size


@dataclass
class Sampler:
    driver_pid: int
    metrics_url: str
    checkpoint: Path
    segments: Path
    load: DoorLoad
    started: float = field(default_factory=time.monotonic)
    rows: list[dict[str, float]] = field(default_factory=list)
    _delivered: int = 0
    _heap: dict[int, tuple[int, int] | None] = field(default_factory=dict)

    def jvm(self) -> int | None:
        return next((p for p in _children(self.driver_pid) if "java" in _cmdline(p).split(" ")[0]), None)

    def sample(self) -> dict[str, float]:
        jvm = self.jvm()
        row: dict[str, float] = {"minutes": round((time.monotonic() - self.started) / 60, 2)}
        row["driver_rss_mb"] = _status(self.driver_pid, "VmRSS") / 1024
        row["driver_threads"] = _status(self.driver_pid, "Threads")
        row["driver_fds"] = _fds(self.driver_pid)
        if jvm is not None:
            row["jvm_rss_mb"] = _status(jvm, "VmRSS") / 1024
            row["jvm_threads"] = _status(jvm, "Threads")
            row["jvm_fds"] = _fds(jvm)
            if jvm not in self._heap:
                self._heap[jvm] = _heap_range(jvm)
            if (heap := self._heap[jvm]) is not None:
                row["jvm_rss_outside_heap_mb"] = _rss_outside(jvm, heap)
            workers = [p for p in _children(jvm) if "python" in _cmdline(p)]
            row["python_workers"] = len(workers)
            row["python_workers_rss_mb"] = sum(_status(p, "VmRSS") for p in workers) / 1024
            gc = _jstat(jvm)
            if gc:
                row["heap_used_mb"] = sum(gc.get(k, 0) for k in ("S0U", "S1U", "EU", "OU")) / 1024
                row["heap_committed_mb"] = sum(gc.get(k, 0) for k in ("S0C", "S1C", "EC", "OC")) / 1024
                row["old_gen_used_mb"] = gc.get("OU", 0) / 1024
                row["metaspace_mb"] = gc.get("MU", 0) / 1024
                row["full_gcs"] = gc.get("FGC", 0)
        try:
            m = _gateway_metrics(self.metrics_url)
            row["state_memory_mb"] = m.get("gateway_state_memory_bytes", 0) / 1e6
            row["state_rows"] = m.get("gateway_state_rows", 0)
        except OSError:
            pass
        row["checkpoint_files"], size = _tree(self.checkpoint)
        row["checkpoint_mb"] = size / 1e6
        row["segment_files"], _ = _tree(self.segments)
        latencies = sorted(self.load.take_latencies())
        if latencies:
            row["round_trip_p50_ms"] = latencies[len(latencies) // 2] * 1000
            row["round_trip_p99_ms"] = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
        row["records_per_s"] = (self.load.delivered - self._delivered) / max(1e-9, self._since())
        self._delivered = self.load.delivered
        self._last = time.monotonic()
        self.rows.append(row)
        return row

    def _since(self) -> float:
        return time.monotonic() - getattr(self, "_last", self.started)


def _slope_per_hour(points: list[tuple[float, float]]) -> float | None:
    """Least-squares growth per hour of (minutes, value) points."""
    if len(points) < 3:
        return None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return None if den == 0 else 60 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den


SERIES = ("jvm_rss_mb", "jvm_rss_outside_heap_mb", "heap_used_mb", "heap_committed_mb", "old_gen_used_mb", "metaspace_mb", "driver_rss_mb",
          "python_workers_rss_mb", "state_memory_mb", "state_rows", "checkpoint_files", "checkpoint_mb",
          "segment_files", "jvm_threads", "driver_threads", "jvm_fds", "driver_fds", "python_workers",
          "round_trip_p50_ms", "round_trip_p99_ms", "records_per_s", "full_gcs")


def _level(peak_before: float, peak_after: float) -> bool:
    """A series has levelled off when its last half peaks no higher than it did between the warm-up and the
    half (5 % or one unit of slack for sampling): a sawtooth such as G1's committed heap passes, a series
    still climbing to its bound does not."""
    return peak_after <= peak_before + max(1.0, 0.05 * abs(peak_before))


def report(rows: list[dict[str, float]], minutes: float) -> tuple[str, dict[str, object]]:
    """The table of the module docstring, and its figures by series. The JVM's RSS follows the heap G1
    commits and gives back; what it holds outside the heap's address range (`jvm_rss_outside_heap_mb`:
    native memory — RocksDB, malloc arenas —, thread stacks, code, metaspace) is what must level off."""
    warm = max(5.0, minutes * 0.1)
    after = [r for r in rows if r["minutes"] >= warm]
    half = [r for r in rows if r["minutes"] >= minutes / 2]
    lines = [f"soak: {minutes:g} min, {len(rows)} samples; growth per hour after {warm:g} min of warm-up and over "
             f"the last half", "",
             "| series | first | last | min | max | growth/h after warm-up | growth/h last half "
             "| peak, warm-up to half | peak, last half | level |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    summary: dict[str, object] = {}
    for name in SERIES:
        values = [r[name] for r in rows if name in r]
        if not values:
            continue
        whole = _slope_per_hour([(r["minutes"], r[name]) for r in after if name in r])
        last = _slope_per_hour([(r["minutes"], r[name]) for r in half if name in r])
        earlier = [r[name] for r in after if name in r and r["minutes"] < minutes / 2]
        later = [r[name] for r in half if name in r]
        peak_before = max(earlier) if earlier else None
        peak_after = max(later) if later else None
        level = None if peak_before is None or peak_after is None else _level(peak_before, peak_after)
        summary[name] = {"first": values[0], "last": values[-1], "min": min(values), "max": max(values),
                         "growth_per_h": whole, "growth_per_h_last_half": last, "peak_before_half": peak_before,
                         "peak_last_half": peak_after, "level": level}
        f = lambda v: "-" if v is None else f"{v:,.1f}"  # noqa: E731
        lines.append(f"| {name} | {f(values[0])} | {f(values[-1])} | {f(min(values))} | {f(max(values))} | "
                     f"{f(whole)} | {f(last)} | {f(peak_before)} | {f(peak_after)} | "
                     f"{'-' if level is None else 'yes' if level else 'no'} |")
    return "\n".join(lines), summary


def _topics_file(work: Path) -> Path:
    topics = json.loads((REPO_ROOT / "conf" / "topics.json").read_text())
    topics["topics"][SOAK_TOPIC] = {"partitions": SOAK_PARTITIONS, "configs": {
        "message.timestamp.type": "LogAppendTime", "segment.bytes": str(4 * 1024 * 1024), "retention.ms": "600000"}}
    path = work / "topics.json"
    path.write_text(json.dumps(topics))
    return path


def _setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.soak")
    parser.add_argument("--minutes", type=float, default=120.0, help="how long to run (default %(default)s)")
    parser.add_argument("--interval", type=float, default=30.0, help="seconds between samples")
    parser.add_argument("--door-rate", type=int, default=2000, help="records/s through the front door")
    parser.add_argument("--work", type=Path, help="working directory (default: a new temporary one, kept)")
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE", type=_setting,
                        help="a Spark setting for the gateway (the config's spark_conf), repeatable")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="gateway-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    broker = LocalKafka(work / "kafka").start()
    metrics_port = free_port()
    config = GatewayConfig(
        bootstrap_servers=broker.bootstrap_servers, topics_file=str(_topics_file(work)),
        segments_root=str(work / "segments"), checkpoint_root=str(work / "checkpoints"),
        metrics_address=f"127.0.0.1:{metrics_port}", front_door_address="127.0.0.1:0",
        retention_check_interval_ms=30_000, ui_enabled=False,
        spark_conf=dict(args.spark_conf))
    create_topics(config.cluster, topic_specs(config))
    (work / "gateway.json").write_text(json.dumps({k: v for k, v in vars(config).items() if v is not None}))
    log = open(work / "driver.log", "ab")  # noqa: SIM115 - the driver owns it
    driver = subprocess.Popen([sys.executable, "-m", "streaming", "run", "--config", str(work / "gateway.json")],
                              stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, start_new_session=True)
    print(f"soak: {args.minutes:g} min in {work} (driver log: {work / 'driver.log'}, spark_conf "
          f"{config.spark_conf})", flush=True)
    load: DoorLoad | None = None
    demo: DemoTraffic | None = None
    try:
        deadline = time.monotonic() + 300
        while not (door := re.search(r"front door on (\S+)", (work / "driver.log").read_text(errors="replace"))):
            if driver.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the gateway did not start; see {work / 'driver.log'}")
            time.sleep(1)  # polling the driver's log for its start line
        load = DoorLoad(door.group(1), args.door_rate)
        demo = DemoTraffic(config.cluster, config.ingress_topic)
        demo.start()
        sampler = Sampler(driver.pid, f"http://127.0.0.1:{metrics_port}/metrics", config.checkpoint_location,
                          config.path(config.segments_root), load)
        end = sampler.started + args.minutes * 60
        while time.monotonic() < end and driver.poll() is None:
            row = sampler.sample()
            print(json.dumps({k: round(v, 1) for k, v in row.items()}), flush=True)
            time.sleep(max(0.0, min(args.interval, end - time.monotonic())))  # the sampling period
        text, summary = report(sampler.rows, args.minutes)
        text += (f"\n\nload: {args.door_rate} records/s of {RECORD_SIZE} B through the front door "
                 f"({load.delivered:,} delivered, {len(load.errors)} errors), demo batches on the ingress topic "
                 f"({demo.sent:,}); driver {'running' if driver.poll() is None else f'exited {driver.returncode}'}"
                 + (f"; spark_conf {config.spark_conf}" if config.spark_conf else ""))
        print("\n" + text)
        (work / "soak-report.md").write_text(text + "\n")
        (work / "soak-report.json").write_text(json.dumps({"summary": summary, "samples": sampler.rows}, indent=1))
        return 0 if driver.poll() is None and not load.errors else 1
    finally:
        if demo is not None:
            demo.stop()
            demo.join(30)
        if load is not None:
            load.stop()
        if driver.poll() is None:
            driver.terminate()
            try:
                driver.wait(120)
            except subprocess.TimeoutExpired:
                driver.kill()
        broker.stop()


if __name__ == "__main__":
    raise SystemExit(main())
