"""Real processes for the fault tests: a Spark standalone cluster started with pyspark's `spark-class`
(a master and workers, as an operator starts one), the gateway driver as `python -m streaming run`,
mixed traffic, a live view of the response topic, and the accounting that must hold after any fault.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer

from contract.responses import decode_response
from embedded.spark_home import SPARK_HOME
from storage.log_reader import read
from storage.verify import verify_partition
from streaming.config import REPO_ROOT, GatewayConfig
from tests.integration.gateway_io import SentBatch, produce_batches, read_all
from tests.integration.ports import free_port
from validators.codec.record_batch import build_record_batch

SPARK_CLASS = Path(sys.executable).parent / "spark-class"
NOW_MS = int(time.time() * 1000)


def _wait_for(predicate: object, what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.2)  # polling a process's log file: there is no event to wait on


class StandaloneCluster:
    """`spark-class org.apache.spark.deploy.master.Master` and `...worker.Worker` processes on loopback."""

    def __init__(self, work_dir: Path, workers: int = 2, cores: int = 1, memory: str = "1536m") -> None:
        self.work_dir = work_dir
        self.port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.n_workers, self.cores, self.memory = workers, cores, memory
        self.master: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.work_dir / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
        env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOG_DIR": str(self.work_dir)}
        return subprocess.Popen([str(SPARK_CLASS), *args], stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)

    @property
    def executor_conf(self) -> dict[str, str]:
        """The executors' java.io.tmpdir in the cluster's work dir: an executor unpacks `spark.archives` from
        a copy in a temp dir of its own that only its shutdown hook removes, and `stop()` kills them."""
        return {"spark.executor.extraJavaOptions": f"-Djava.io.tmpdir={self.work_dir}"}

    def log(self, name: str) -> str:
        path = self.work_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self) -> StandaloneCluster:
        self.master = self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                             "--port", str(self.port), "--webui-port", str(free_port())])
        _wait_for(lambda: "Starting Spark master" in self.log("master"), "the Spark master", 60)
        for i in range(self.n_workers):
            self.start_worker(i)
        return self

    def start_worker(self, i: int) -> None:
        name = f"worker{i}"
        (self.work_dir / name).mkdir(exist_ok=True)
        before = self.log(name).count("Successfully registered with master")
        worker = self._spawn(name, ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                    "--cores", str(self.cores), "--memory", self.memory, "--webui-port", "0",
                                    "--work-dir", str(self.work_dir / name), self.master_url])
        if i < len(self.workers):
            self.workers[i] = worker
        else:
            self.workers.append(worker)
        _wait_for(lambda: self.log(name).count("Successfully registered with master") > before, f"{name}", 60)

    def kill_worker(self, i: int) -> None:
        os.killpg(self.workers[i].pid, signal.SIGKILL)  # the worker JVM and the executors it launched
        self.workers[i].wait(30)

    def executor_pids(self) -> list[int]:
        """This cluster's executors: each in its worker's process group (another cluster's, started by a test
        running beside, are not)."""
        groups = {w.pid for w in self.workers}
        out = subprocess.run(["pgrep", "-f", "CoarseGrainedExecutorBackend"], capture_output=True, text=True,
                             check=False)
        pids = []
        for pid in map(int, out.stdout.split()):
            try:
                if os.getpgid(pid) in groups:
                    pids.append(pid)
            except ProcessLookupError:  # gone since pgrep saw it
                pass
        return pids

    def stop(self) -> None:
        for p in [*self.workers, self.master]:
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(30)




class GatewayDriver:
    """`python -m streaming run --config <file>`: the gateway's driver as an operator starts it (`command`
    "door": a front door of its own, `gateway door`)."""

    def __init__(self, config: GatewayConfig, work_dir: Path, name: str = "driver", args: tuple[str, ...] = (),
                 command: str = "run") -> None:
        self.config_path = work_dir / f"{name}.json"
        doc = dataclasses.asdict(config)
        self.config_path.write_text(json.dumps(doc))
        self.log_path = work_dir / f"{name}.log"
        self.args = args  # e.g. ("--standby",)
        self.command = command
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> GatewayDriver:
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen([sys.executable, "-m", "streaming", self.command, "--config",
                                      str(self.config_path), *self.args],
                                     stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, start_new_session=True)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def logged(self, text: str) -> bool:
        """Whether the driver's log holds `text`; a driver that exited without logging it fails the wait at
        once, with the end of its log."""
        if text in self.log():
            return True
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"{self.log_path.name}: exited {self.proc.returncode} before logging {text!r}:\n"
                                 f"{self.log()[-3000:]}")
        return False

    def kill(self) -> None:
        """kill -9 the driver and its Spark JVM (its process group), as a crashed host would."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self, timeout_s: float = 120) -> int:
        """SIGTERM to the driver alone (as Kubernetes sends it): it stops between micro-batches."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)


def mixed_traffic(n: int, seed: int) -> list[tuple[str, int, bytes]]:
    """Good batches to both timestamp types, and every 7th too far in the future (INVALID_TIMESTAMP) or
    every 11th to a partition that does not exist (UNKNOWN_TOPIC_OR_PARTITION)."""
    out = []
    for i in range(seed, seed + n):
        topic = "ct" if i % 2 else "lat"
        partition = i % 2
        ts = NOW_MS + (3 * 3_600_000 if i % 7 == 0 else 0) + i
        if i % 11 == 0:
            partition = 9
        records = [(ts, f"k{i}".encode(), f"v{i}-{j}".encode() * 3) for j in range(1 + i % 5)]
        out.append((topic, partition, build_record_batch(records)))
    return out


@dataclass
class ResponseWatch:
    """Reads the response topic from the start while the test runs: every response with the time it was seen."""

    config: GatewayConfig
    seen: dict[str, list[tuple[float, dict]]] = field(default_factory=lambda: defaultdict(list))

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        c = Consumer(self.config.cluster.client({
            "group.id": self.config.cluster.group_id("test-watch"), "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "logger": logging.getLogger("tests.response_watch")}))  # a broker restart is expected
        c.subscribe([self.config.response_topic])
        while not self._stop.is_set():
            m = c.poll(0.2)
            if m is None or m.error() is not None:
                continue
            r = decode_response(m.value())
            with self._lock:
                self.seen[r["request_id"]].append((time.monotonic(), r))
        c.close()

    def answered(self, sent: list[SentBatch]) -> int:
        with self._lock:
            return sum(1 for s in sent if s.request_id in self.seen)

    def first_after(self, sent: list[SentBatch]) -> float:
        with self._lock:
            return min(self.seen[s.request_id][0][0] for s in sent if s.request_id in self.seen)

    def first_since(self, t0: float, timeout_s: float = 300) -> float:
        """Seconds from `t0` (time.monotonic) to the first response seen after it."""
        def latest() -> float:
            with self._lock:
                return max((t for rs in self.seen.values() for t, _ in rs), default=0.0)
        _wait_for(lambda: latest() >= t0, "a response", timeout_s)
        with self._lock:
            return min(t for rs in self.seen.values() for t, _ in rs if t >= t0) - t0

    def wait_all(self, sent: list[SentBatch], timeout_s: float) -> None:
        _wait_for(lambda: self.answered(sent) == len(sent), f"responses to {len(sent)} batches", timeout_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def send_wave(config: GatewayConfig, n: int, seed: int) -> list[SentBatch]:
    return produce_batches(config, mixed_traffic(n, seed))


@dataclass(frozen=True)
class Accounting:
    batches: int
    responses: int
    duplicate_responses: int
    appended: int
    rejected: int


def account(config: GatewayConfig, sent: list[SentBatch]) -> Accounting:
    """What must hold after any fault (at-least-once responses, exactly-once storage):
    every batch answered, all its responses identical; accepted batches on disjoint, contiguous offset
    ranges per partition, stored exactly once; every rejected batch dead-lettered; storage verifies."""
    responses: dict[str, list[dict]] = defaultdict(list)
    for m in read_all(config, config.response_topic):
        r = decode_response(m.value())
        responses[r["request_id"]].append(r)
    missing = [s.request_id for s in sent if s.request_id not in responses]
    assert not missing, f"{len(missing)} of {len(sent)} batches have no response"
    for rid, rs in responses.items():
        assert all(r == rs[0] for r in rs), f"responses to {rid} differ: {rs}"
    by_request = {s.request_id: s for s in sent}
    accepted = [rs[0] for rid, rs in responses.items() if rid in by_request and rs[0]["error_code"] == 0]
    rejected = [rs[0] for rid, rs in responses.items() if rid in by_request and rs[0]["error_code"] != 0]

    root = config.path(config.segments_root)
    ranges: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for r in accepted:
        ranges[(r["topic"], r["partition"])].append((r["base_offset"], r["base_offset"] + r["record_count"] - 1))
    for (topic, partition), spans in ranges.items():
        spans.sort()
        assert spans[0][0] == 0 and all(b[0] == a[1] + 1 for a, b in zip(spans, spans[1:], strict=False)), (
            f"{topic}-{partition}: offset ranges not disjoint and contiguous: {spans[:5]}...")
        stored = [rec.offset for rec in read(root, topic, partition, 0, 10**7)]
        assert stored == list(range(spans[-1][1] + 1)), f"{topic}-{partition}: stored offsets differ from responses"
        report = verify_partition(root, topic, partition)
        assert report.ok, report.problems

    letters = {m.key().decode() for m in read_all(config, config.dlq_topic)}
    undead = [r["request_id"] for r in rejected if r["request_id"] not in letters]
    assert not undead, f"{len(undead)} rejected batches have no dead letter"
    total = sum(len(rs) for rid, rs in responses.items() if rid in by_request)
    return Accounting(len(sent), total, total - len(sent), len(accepted), len(rejected))
