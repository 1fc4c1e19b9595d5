"""A Kafka Connect worker in distributed mode (`ConnectDistributed` 4.2.1 from `.jvm/kafka-connect`,
`conf/jvm/kafka-connect.pom.xml`) in a JVM of its own, run as `bin/connect-distributed.sh` runs it, and driven
through its REST API as a user would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embedded.local_kafka import REPO_ROOT, java_executable, log4j2_config, spawn_tied_to_parent
from tests.integration.polling import until

CONNECT_JARS_DIR = REPO_ROOT / ".jvm" / "kafka-connect"
MAIN_CLASS = "org.apache.kafka.connect.cli.ConnectDistributed"
HEAP = "384m"  # connect-distributed.sh's 2 GiB is for real connectors; two file connectors need little
STOP_TIMEOUT_S = 90.0  # the herder stops connectors and tasks (5 s each at most) and commits their offsets
REST_TIMEOUT_S = 30.0
# REST answers while the worker is not ready to take a connector: 404 (Jetty serves before the worker's resources
# are registered), 409 "rebalance is in progress", 500 "Request timed out" (the herder still reading the config
# topic), 503 (herder starting); ask again until it is
RETRY_STATUSES = (404, 409, 500, 503)
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


class ConnectJarsMissingError(RuntimeError):
    """`.jvm/kafka-connect` is not there: `make setup` (its `frameworks` target) has not run."""


def connect_classpath(jars_dir: Path = CONNECT_JARS_DIR) -> str:
    jars = sorted(jars_dir.glob("*.jar")) if jars_dir.is_dir() else []
    if not any(jar.name.startswith("connect-runtime-4") for jar in jars):
        raise ConnectJarsMissingError(f"Kafka Connect's jars not found in {jars_dir}: run `make frameworks` in {REPO_ROOT}")
    return os.pathsep.join(str(jar) for jar in jars)


@dataclass(frozen=True)
class InternalTopics:
    """The worker's three topics, which the worker creates itself (CreateTopics) when they are missing."""

    configs: str
    offsets: str
    status: str

    def names(self) -> tuple[str, str, str]:
        return self.configs, self.offsets, self.status


class RestError(RuntimeError):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status


class ConnectWorker:
    """One worker process; `start()` again after `stop()` runs a new process on the same properties (the same
    group and topics: a restarted worker)."""

    def __init__(self, work: Path, bootstrap: str, group: str, topics: InternalTopics, rest_port: int,
                 settings: Mapping[str, str] | None = None) -> None:
        work.mkdir(parents=True, exist_ok=True)
        self.work = work
        self.rest_port = rest_port
        self.log_file = work / "connect.log"
        self.output_file = work / "connect.out"
        self._log_config = work / "connect-log4j2.xml"
        self._log_config.write_text(log4j2_config(self.log_file))
        self.properties_file = work / "connect-distributed.properties"
        properties = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            # the file connectors' lines as strings, unwrapped (no JSON envelope)
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": topics.configs,
            "offset.storage.topic": topics.offsets,
            "status.storage.topic": topics.status,
            # the door keeps one copy of each partition; Connect's default of 3 would be refused
            # (INVALID_REPLICATION_FACTOR), as by a one-broker cluster
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "listeners": f"http://127.0.0.1:{rest_port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(rest_port),
            **(settings or {}),
        }
        self.properties_file.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None, "the worker is running"
        cmd = [java_executable(), f"-Xmx{HEAP}", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
               f"-Dlog4j2.configurationFile={self._log_config}", "-cp", connect_classpath(), MAIN_CLASS,
               str(self.properties_file)]
        with self.output_file.open("ab") as out:
            self.proc = spawn_tied_to_parent(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=self.work)

    def stop(self) -> int:
        """SIGTERM, as `kill` of connect-distributed.sh: Connect's shutdown hook stops the herder gracefully
        (connectors and tasks stopped, their offsets committed, the group left); its exit status."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"the Connect worker did not stop within {STOP_TIMEOUT_S:.0f} s of SIGTERM\n"
                                 f"{self.log_tail()}") from None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self, chars: int = 6000) -> str:
        parts = []
        for path in (self.log_file, self.output_file):
            if path.exists():
                parts.append(f"--- {path}\n{path.read_text(errors='replace')[-chars:]}")
        return "\n".join(parts)

    # ------------------------------------------------------------------ REST

    def rest(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=REST_TIMEOUT_S) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as e:
            raise RestError(e.code, e.read().decode(errors="replace")) from None
        return json.loads(text) if text else None

    def _answers(self, method: str, path: str, body: Any = None) -> bool:
        """Whether the call went through; False while the worker is not listening or not ready for it."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"the Connect worker exited with {self.proc.returncode}\n{self.log_tail()}")
        try:
            self.rest(method, path, body)
        except RestError as e:
            if e.status in RETRY_STATUSES:
                return False
            raise
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False
        return True

    def wait_ready(self, timeout_s: float = 180.0) -> None:
        """Until the herder lists connectors: it has joined its group and read the config topic."""
        until(lambda: self._answers("GET", "/connectors"), "the Connect worker's REST API to list connectors",
              timeout_s, self.log_tail)

    def put_connector(self, name: str, config: Mapping[str, str], timeout_s: float = 120.0) -> None:
        """Create (or reconfigure) connector `name` with `config`."""
        until(lambda: self._answers("PUT", f"/connectors/{name}/config", {"name": name, **config}),
              f"the worker to take connector {name}", timeout_s, self.log_tail)

    def status(self, name: str) -> dict[str, Any]:
        try:
            return self.rest("GET", f"/connectors/{name}/status")  # type: ignore[no-any-return]
        except RestError as e:
            if e.status == 404:  # not in the config topic's view yet
                return {}
            raise

    def running(self, name: str) -> bool:
        """The connector and its tasks RUNNING; a FAILED one fails the test with its trace."""
        status = self.status(name)
        states = [status.get("connector", {}), *status.get("tasks", [])]
        failed = [s for s in states if s.get("state") == "FAILED"]
        assert not failed, f"connector {name} failed: {failed}\n{self.log_tail()}"
        return bool(status.get("tasks")) and all(s.get("state") == "RUNNING" for s in states)

    def wait_running(self, name: str, timeout_s: float = 120.0) -> None:
        until(lambda: self.running(name), f"connector {name} and its tasks to run", timeout_s, self.log_tail)
