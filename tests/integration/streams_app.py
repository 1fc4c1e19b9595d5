"""A Kafka Streams 4.2.1 application (`java/StreamsWordCount.java`, compiled by the JDK's javac against
`.jvm/kafka-streams`, `conf/jvm/kafka-streams.pom.xml`) in a JVM of its own, its state changes read from its
stdout."""

from __future__ import annotations

import os
import re
import signal
import struct
import subprocess
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from embedded.local_kafka import REPO_ROOT, java_executable, log4j2_config, spawn_tied_to_parent
from tests.integration.polling import until

STREAMS_JARS_DIR = REPO_ROOT / ".jvm" / "kafka-streams"
WORD_COUNT_SOURCE = Path(__file__).parent / "java" / "StreamsWordCount.java"
WORD_COUNT_CLASS = "StreamsWordCount"
HEAP = "256m"
STOP_TIMEOUT_S = 90.0  # beyond the application's own close timeout (60 s)
INPUT, OUTPUT, PARTITIONS = "text", "word-counts", 2  # the word count's topics
WORDS = ("kafka", "spark", "door", "gateway", "stream", "count", "topic", "record")


class StreamsJarsMissingError(RuntimeError):
    """`.jvm/kafka-streams` is not there: `make setup` (its `frameworks` target) has not run."""


def streams_classpath(jars_dir: Path = STREAMS_JARS_DIR) -> str:
    jars = sorted(jars_dir.glob("*.jar")) if jars_dir.is_dir() else []
    if not any(jar.name.startswith("kafka-streams-4") for jar in jars):
        raise StreamsJarsMissingError(f"Kafka Streams' jars not found in {jars_dir}: run `make frameworks` in {REPO_ROOT}")
    return os.pathsep.join(str(jar) for jar in jars)


def compile_word_count(work: Path) -> Path:
    """The word count compiled into `work`/classes."""
    classes = work / "classes"
    javac = Path(java_executable()).resolve().parent / "javac"
    done = subprocess.run([str(javac), "-Xlint:all", "-Werror", "-cp", streams_classpath(), "-d", str(classes),
                           str(WORD_COUNT_SOURCE)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"javac failed:\n{done.stdout}\n{done.stderr}"
    return classes


class WordCountApp:
    """One run of the application: `start()` in `__init__`, `stop()` closes it gracefully."""

    def __init__(self, classes: Path, work: Path, bootstrap: str, application_id: str, input_topic: str,
                 output_topic: str, state_dir: Path, settings: Sequence[str] = ()) -> None:
        work.mkdir(parents=True, exist_ok=True)
        self.log_file = work / "streams.log"
        self.output_file = work / "streams.out"
        log_config = work / "streams-log4j2.xml"
        log_config.write_text(log4j2_config(self.log_file))
        # its temporary files in the run's own directory: RocksDB copies its 15 MB library there at each start,
        # and a killed run cannot delete it
        cmd = [java_executable(), f"-Xmx{HEAP}", "-XX:+ExitOnOutOfMemoryError", f"-Djava.io.tmpdir={work}",
               f"-Dlog4j2.configurationFile={log_config}", "-cp", f"{classes}{os.pathsep}{streams_classpath()}",
               WORD_COUNT_CLASS, bootstrap, application_id, input_topic, output_topic, str(state_dir), *settings]
        with self.output_file.open("wb") as out:
            self.proc = spawn_tied_to_parent(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=work)

    def lines(self) -> list[str]:
        return self.output_file.read_text(errors="replace").splitlines() if self.output_file.exists() else []

    def states(self) -> list[str]:
        return [line.split(" ", 1)[1] for line in self.lines() if line.startswith("STATE ")]

    def log_tail(self, chars: int = 6000) -> str:
        parts = []
        for path in (self.log_file, self.output_file):
            if path.exists():
                parts.append(f"--- {path}\n{path.read_text(errors='replace')[-chars:]}")
        return "\n".join(parts)

    def _in(self, state: str) -> bool:
        states = self.states()
        assert "ERROR" not in states and not any(line.startswith("UNCAUGHT") for line in self.lines()), \
            f"the Streams application failed\n{self.log_tail()}"
        assert self.proc.poll() is None, f"the Streams application exited with {self.proc.returncode}\n{self.log_tail()}"
        return bool(states) and states[-1] == state

    def wait_running(self, timeout_s: float = 180.0) -> None:
        until(lambda: self._in("RUNNING"), "the Streams application to run", timeout_s, self.log_tail)

    def stop(self) -> int:
        """SIGTERM: the application's shutdown hook closes the client (offsets committed, the group left)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the Streams application did not stop within {STOP_TIMEOUT_S:.0f} s of SIGTERM\n"
                                 f"{self.log_tail()}") from None
        assert "CLOSED" in self.lines(), f"the Streams application exited without closing\n{self.log_tail()}"
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def sentences(first: int, count: int) -> list[str]:
    """Lines of a few words each, some repeated within a line, in mixed case and punctuation."""
    return [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(1 + i % 5)).capitalize() + "."
            for i in range(first, first + count)]


def expected_counts(lines: list[str]) -> Counter[str]:
    return Counter(w for line in lines for w in re.split(r"\W+", line.lower()) if w)


def produce_lines(bootstrap: str, lines: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": 120000})
    errors: list[str] = []
    for line in lines:
        producer.produce(INPUT, value=line.encode(),
                         on_delivery=lambda err, _msg: err is not None and errors.append(str(err)))
    assert producer.flush(150) == 0
    assert errors == []


class CountsReader:
    """The output topic read through the door from the start: the latest count of each word."""

    def __init__(self, bootstrap: str, isolation: str = "read_uncommitted") -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:8]}",
                                  "enable.auto.commit": False, "isolation.level": isolation})
        self.consumer.assign([TopicPartition(OUTPUT, p, 0) for p in range(PARTITIONS)])
        self.latest: dict[str, int] = {}
        self.max_seen: dict[str, int] = {}

    def poll(self) -> dict[str, int]:
        for msg in self.consumer.consume(500, timeout=0.2):
            assert msg.error() is None, msg.error()
            (count,) = struct.unpack(">q", msg.value())  # Serdes.Long: 8 bytes, big-endian
            word = msg.key().decode()
            self.latest[word] = count
            self.max_seen[word] = max(count, self.max_seen.get(word, 0))
        return self.latest

    def low_watermarks(self, topic: str) -> list[int]:
        """Each partition's log start offset (ListOffsets, earliest) through the door."""
        return [self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[0] for p in range(PARTITIONS)]

    def close(self) -> None:
        self.consumer.close()
