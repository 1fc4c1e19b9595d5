"""Apache Kafka's own producer benchmark, `org.apache.kafka.tools.ProducerPerformance` (what
`kafka-producer-perf-test.sh` runs), as a subprocess from the jars `make jars` resolves into
`.jvm/kafka-tools` (`conf/jvm/kafka-tools.pom.xml`), and a parser for what it prints.

The tool sends `--num-records` records of `--record-size` random bytes, no key, no partition (the Java
client's built-in partitioner picks), through one `KafkaProducer`, then closes the producer and prints
one summary line: records/s and MiB/s over the whole run, and send() -> callback latency (average,
maximum, 50th/95th/99th/99.9th percentiles, whole milliseconds). Failed sends print a stack trace to
stderr and are left out of the counts.

The subprocess runs in its own process group, tied to this process (the kernel kills it if we die),
and is killed with its group when it outlives its deadline; its output goes to files, not pipes, so a
run whose every record fails (a stack trace each) cannot fill memory or block on a full pipe.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from embedded.local_kafka import REPO_ROOT, java_executable, log4j2_config, spawn_tied_to_parent

TOOLS_JARS_DIR = REPO_ROOT / ".jvm" / "kafka-tools"
MAIN_CLASS = "org.apache.kafka.tools.ProducerPerformance"
# kafka-producer-perf-test.sh's heap is 512 MiB; a larger buffer.memory needs room beside it
MIN_HEAP_MB = 512

# Stats.printTotal (Kafka 4.2.1): "%d%s records sent, %f records/sec (%.2f MB/sec), %.2f ms avg latency,
# %.2f ms max latency, %d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th." (%s: " steady state" after
# --warmup-records). The JVM runs with an English locale, so the decimal separator is a dot.
SUMMARY = re.compile(
    r"^(?P<records>\d+)(?P<steady> steady state)? records sent, (?P<rate>[\d.]+) records/sec "
    r"\((?P<mib>[\d.]+) MB/sec\), (?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, "
    r"(?P<p50>\d+) ms 50th, (?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th\.\s*$"
)
# Stats.printWindow, every --reporting-interval: what a run that never finished got through
WINDOW = re.compile(r"^(?P<records>\d+) records sent, (?P<rate>[\d.]+) records/sec \((?P<mib>[\d.]+) MB/sec\), "
                    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency\.\s*$")
# the first line of a stack trace (a failed send's callback, or the tool's own failure)
EXCEPTION_LINE = re.compile(r"^(?:Exception in thread \S+ )?[\w.$]+(?:Exception|Error)\b(?::.*)?$")


class KafkaToolsJarsMissingError(RuntimeError):
    """`.jvm/kafka-tools` is not there: `make jars` has not run since the manifest was added."""


@dataclass(frozen=True)
class PerfSummary:
    """ProducerPerformance's summary line. `mib_per_s` is the tool's "MB/sec": payload bytes / 2^20."""

    records: int
    records_per_s: float
    mib_per_s: float
    avg_ms: float
    max_ms: float
    p50_ms: int
    p95_ms: int
    p99_ms: int
    p999_ms: int
    steady_state: bool = False

    @property
    def percentiles_ms(self) -> dict[float, float]:
        """Quantile -> latency (ms); 1.0 is the maximum."""
        return {0.5: self.p50_ms, 0.95: self.p95_ms, 0.99: self.p99_ms, 0.999: self.p999_ms, 1.0: self.max_ms}


def parse_summary(stdout: str, steady_state: bool = False) -> PerfSummary | None:
    """The last summary line of the run (the steady-state one with `steady_state`), or None when the tool
    printed none (it failed, or was killed before the end)."""
    found = None
    for line in stdout.splitlines():
        m = SUMMARY.match(line.strip())
        if m and bool(m["steady"]) == steady_state:
            found = PerfSummary(int(m["records"]), float(m["rate"]), float(m["mib"]), float(m["avg"]),
                                float(m["max"]), int(m["p50"]), int(m["p95"]), int(m["p99"]), int(m["p999"]),
                                steady_state=bool(m["steady"]))
    return found


def windows(stdout: str) -> list[tuple[int, float]]:
    """(records, records/s) of each progress window, in order."""
    return [(int(m["records"]), float(m["rate"])) for line in stdout.splitlines()
            if (m := WINDOW.match(line.strip()))]


def exception_lines(stderr: str) -> list[str]:
    """The first line of each stack trace on stderr (one per failed send, and the tool's own)."""
    return [line.strip() for line in stderr.splitlines() if EXCEPTION_LINE.match(line.strip())]


def tools_classpath(jars_dir: Path = TOOLS_JARS_DIR) -> str:
    jars = sorted(jars_dir.glob("*.jar")) if jars_dir.is_dir() else []
    if not any(jar.name.startswith("kafka-tools-4") for jar in jars):
        raise KafkaToolsJarsMissingError(f"Kafka's tools jars not found in {jars_dir}: run `make jars` in {REPO_ROOT}")
    return os.pathsep.join(str(jar) for jar in jars)


@dataclass(frozen=True)
class PerfRun:
    """One ProducerPerformance run: its summary (None if it printed none) and what went wrong."""

    summary: PerfSummary | None
    returncode: int | None  # None: killed at the deadline
    seconds: float  # wall clock of the whole subprocess, JVM start included
    windows: list[tuple[int, float]]
    exceptions: list[str]  # first lines of stack traces on stderr
    stdout_tail: str
    stderr_tail: str
    log_file: Path

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def problems(self) -> list[str]:
        out = []
        if self.timed_out:
            got = sum(r for r, _ in self.windows)
            out.append(f"killed after {self.seconds:.0f} s without finishing (~{got} records acknowledged by then)")
        elif self.returncode != 0:
            out.append(f"exit {self.returncode}")
        if self.summary is None and not self.timed_out:
            out.append("no summary line")
        if self.exceptions:
            distinct = list(dict.fromkeys(self.exceptions))
            out.append(f"{len(self.exceptions)} stack traces seen, e.g. {'; '.join(distinct[:3])}")
        return out


def producer_command(bootstrap: str, topic: str, records: int, record_size: int, props: Mapping[str, str],
                     log_config: Path, heap_mb: int = MIN_HEAP_MB, throughput: int = -1) -> list[str]:
    """`java ... ProducerPerformance` with `props` as producer settings, its sends throttled to `throughput`
    records/s (-1: unthrottled). Kafka 4.2 spells them --bootstrap-server and --command-property
    (--producer-props is deprecated)."""
    # A value holding "=" (a JAAS line) cannot be a --command-property: it goes in a properties file
    inline = {k: v for k, v in props.items() if "=" not in v}
    in_file = {k: v for k, v in props.items() if "=" in v}
    config_file = log_config.with_suffix(".properties")
    if in_file:
        config_file.write_text("".join(f"{k}={v}\n" for k, v in in_file.items()))
    return [
        java_executable(), f"-Xmx{heap_mb}m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true",
        "-Duser.language=en", "-Duser.country=US",  # the summary's %f must print a decimal dot
        f"-Dlog4j2.configurationFile={log_config}", "-cp", tools_classpath(), MAIN_CLASS,
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records),
        "--record-size", str(record_size), "--throughput", str(throughput),
        *(["--command-property", *(f"{k}={v}" for k, v in inline.items())] if inline else []),
        *(["--command-config", str(config_file)] if in_file else []),
    ]


def heap_for(props: Mapping[str, str]) -> int:
    """MiB of heap: the default, or twice buffer.memory with room for the client itself."""
    buffer_mb = int(props.get("buffer.memory", 32 * 1024 * 1024)) // (1024 * 1024)
    return max(MIN_HEAP_MB, 2 * buffer_mb + 256)


def run_producer_performance(bootstrap: str, topic: str, records: int, record_size: int,
                             props: Mapping[str, str], work: Path, timeout_s: float, name: str = "perf") -> PerfRun:
    """Run the tool to its end or until `timeout_s`, then kill its process group; never raises for
    what the tool itself does (a failure is in the returned run's `problems()`)."""
    work.mkdir(parents=True, exist_ok=True)
    stdout_path, stderr_path = work / f"{name}.stdout", work / f"{name}.stderr"
    log_file, log_config = work / f"{name}.client.log", work / f"{name}.log4j2.xml"
    log_config.write_text(log4j2_config(log_file, level="WARN"))
    cmd = producer_command(bootstrap, topic, records, record_size, props, log_config, heap_for(props))
    start = time.monotonic()
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        proc = spawn_tied_to_parent(cmd, stdout=out, stderr=err, cwd=work)
    returncode: int | None = None
    try:
        returncode = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        pass
    finally:
        if proc.poll() is None:  # the deadline, or we are interrupted: no JVM outlives its row
            stop_group(proc)
    seconds = time.monotonic() - start
    stdout = stdout_path.read_text(errors="replace")
    stderr = _head_and_tail(stderr_path)
    return PerfRun(parse_summary(stdout), returncode, seconds, windows(stdout), exception_lines(stderr),
                   "\n".join(stdout.splitlines()[-5:]), "\n".join(stderr.splitlines()[-10:]), log_file)


def stop_group(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM the process group, SIGKILL it after `grace_s`."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 30.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _head_and_tail(path: Path, size: int = 256 * 1024) -> str:
    """At most `size` bytes from each end of a file (stderr may hold a stack trace per record)."""
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        total = f.tell()
        f.seek(0)
        if total <= 2 * size:
            return f.read().decode(errors="replace")
        head = f.read(size)
        f.seek(total - size)
        return (head + b"\n" + f.read()).decode(errors="replace")
