"""A Kafka Streams 4.2.1 application (`java/StreamsWordCount.java`, compiled by the JDK's javac against
`.jvm/kafka-streams`, `conf/jvm/kafka-streams.pom.xml`) in a JVM of its own, its state changes read from its
stdout."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

from embedded.local_kafka import REPO_ROOT, java_executable, log4j2_config, spawn_tied_to_parent
from tests.integration.polling import until

STREAMS_JARS_DIR = REPO_ROOT / ".jvm" / "kafka-streams"
WORD_COUNT_SOURCE = Path(__file__).parent / "java" / "StreamsWordCount.java"
WORD_COUNT_CLASS = "StreamsWordCount"
HEAP = "256m"
STOP_TIMEOUT_S = 90.0  # beyond the application's own close timeout (60 s)


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
        cmd = [java_executable(), f"-Xmx{HEAP}", "-XX:+ExitOnOutOfMemoryError",
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
