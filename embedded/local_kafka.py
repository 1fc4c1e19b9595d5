"""A real single-node Apache Kafka broker (KRaft, combined broker+controller) for tests and `make run`.

The broker is Apache Kafka's own `kafka.Kafka`, run from the jars that `make jars` resolves into
`.jvm/kafka` (see `conf/jvm/kafka-broker.pom.xml`). Nothing here imitates Kafka.

    with LocalKafka(work_dir) as kafka:
        kafka.create_topics([("orders", 3, {"message.timestamp.type": "LogAppendTime"})])
        producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap_servers})

Layout of the work dir: `server.properties`, `log4j2.xml`, `kraft-logs/` (the KRaft metadata log
and the topic logs), `broker.log` (the broker's log4j2 output) and `broker.stdout.log` (whatever
the JVM itself prints: crashes, GC warnings, SLF4J binding problems).

No orphan JVM: the broker runs in its own process group; `stop()` terminates the group, an
`atexit` hook stops every broker still running, and the JVM gets `PR_SET_PDEATHSIG(SIGKILL)` so
the kernel kills it when its parent dies without running `atexit` (SIGKILL, crash). Linux ties
the death signal to the *thread* that started the process, so start the broker from a thread
that lives as long as the broker should (normally the main thread).
"""

from __future__ import annotations

import atexit
import base64
import ctypes
import functools
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from xml.sax.saxutils import quoteattr

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from contract.limits import IngressLimits
from contract.repository import REPO_ROOT
from embedded.class_data_sharing import KAFKA_ARCHIVE, using
from kafka_cluster.admin import TopicSpec, create_topics, remaining_s
from kafka_cluster.security import KafkaCluster, load_kafka_security

log = logging.getLogger(__name__)

KAFKA_JARS_DIR = REPO_ROOT / ".jvm" / "kafka"

BROKER_HEAP = "512m"  # the machine also runs Spark; Kafka's scripts default to 1 GiB
# Kafka's own GC settings (kafka-run-class.sh): a broker that serves a cluster's traffic
KAFKA_GC = ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20")
# `gateway run`'s embedded broker serves a demo and a developer's tries: the serial collector and C1 alone spend
# less CPU starting it, which on two cores shared with Spark's start brings the first response about 2 s sooner
# (docs/performance.md); a broker under load wants KAFKA_GC and the JDK's tiered compilation.
QUICK_START_JVM = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
TOOL_HEAP = "256m"
DEFAULT_START_TIMEOUT_S = 120.0
DEFAULT_STOP_TIMEOUT_S = 30.0


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


class KafkaJarsMissingError(RuntimeError):
    """The broker jars are not there: `make jars` has not run."""


class BrokerStartError(RuntimeError):
    """The broker exited or did not answer during start-up; the message holds its log tail."""


# --------------------------------------------------------------------------- classpath and tools


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (the kernel picks it; a race remains, as always)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def started_address(work_dir: Path, port: int) -> str:
    """Where the broker of `work_dir` was last started (the PLAINTEXT listener its server.properties
    advertises), else 127.0.0.1:`port`: how the gateway's commands find `make run`'s embedded broker, which
    takes a free port when its own is taken."""
    try:
        lines = (work_dir / "server.properties").read_text().splitlines()
    except OSError:
        return f"127.0.0.1:{port}"
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "advertised.listeners":
            for listener in value.split(","):
                if listener.strip().startswith("PLAINTEXT://"):
                    return listener.strip().removeprefix("PLAINTEXT://")
    return f"127.0.0.1:{port}"


def kafka_classpath(jars_dir: Path = KAFKA_JARS_DIR) -> str:
    """All jars of `.jvm/kafka` joined for `java -cp`."""
    jars = sorted(jars_dir.glob("*.jar")) if jars_dir.is_dir() else []
    if not any(jar.name.startswith("kafka_2.13-") for jar in jars):
        raise KafkaJarsMissingError(
            f"Apache Kafka broker jars not found in {jars_dir}: run `make jars` in {REPO_ROOT}"
        )
    _warn_if_no_slf4j_binding(tuple(jar.name for jar in jars))
    return os.pathsep.join(str(jar) for jar in jars)


@functools.cache
def _warn_if_no_slf4j_binding(jar_names: tuple[str, ...]) -> None:
    """Kafka logs through SLF4J 1.7, which binds only to log4j-slf4j-impl (not the slf4j2 one).

    Without that binding SLF4J falls back to its no-op logger and broker.log stays empty, which
    turns every broker failure into a silent exit; say so once, with the fix.
    """
    slf4j_1 = any(name.startswith("slf4j-api-1.") for name in jar_names)
    slf4j_2 = any(name.startswith("slf4j-api-2.") for name in jar_names)
    has_1_binding = any(name.startswith("log4j-slf4j-impl-") for name in jar_names)
    has_2_binding = any(name.startswith("log4j-slf4j2-impl-") for name in jar_names)
    if (slf4j_1 and not slf4j_2 and not has_1_binding) or (slf4j_2 and not has_2_binding):
        log.warning(
            "the Kafka classpath has no SLF4J binding matching its slf4j-api (%s): the broker log "
            "will be empty; conf/jvm/kafka-broker.pom.xml should use log4j-slf4j-impl for slf4j-api 1.x",
            ", ".join(name for name in jar_names if "slf4j" in name),
        )


def java_executable() -> str:
    """`$JAVA_HOME/bin/java` when set, else `java` on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home, "bin", "java") if java_home else None
    if candidate is not None and candidate.is_file():
        return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise RuntimeError("no `java` found (set JAVA_HOME or put Java 17+ on PATH)")
    return found


def log4j2_config(log_file: Path | None, level: str = "INFO") -> str:
    """A log4j2 XML configuration: everything to `log_file`, or to stderr when it is None."""
    if log_file is None:
        appender = '<Console name="out" target="SYSTEM_ERR">{layout}</Console>'
    else:
        appender = f'<File name="out" fileName={quoteattr(str(log_file))} append="true">{{layout}}</File>'
    layout = '<PatternLayout pattern="[%d{ISO8601}] %-5p [%t] %m (%c)%n"/>'
    # shutdownHook="disable": log4j's own hook races Kafka's shutdown hook and would drop the
    # shutdown log; the File appender flushes every line, so nothing is lost without it.
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN" shutdownHook="disable">
  <Appenders>
    {appender.format(layout=layout)}
  </Appenders>
  <Loggers>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Root level="{level}"><AppenderRef ref="out"/></Root>
  </Loggers>
</Configuration>
"""


_tools_config_lock = threading.Lock()
_tools_config_path: Path | None = None


def tools_log4j_config() -> Path:
    """A WARN-to-stderr log4j2 config for tools, written once per process, so tool stdout stays clean."""
    global _tools_config_path
    with _tools_config_lock:
        if _tools_config_path is None:
            tmp_dir = Path(tempfile.mkdtemp(prefix="kafka-tools-"))
            atexit.register(shutil.rmtree, tmp_dir, True)
            path = tmp_dir / "log4j2-tools.xml"
            path.write_text(log4j2_config(None, level="WARN"))
            _tools_config_path = path
        return _tools_config_path


def java_command(main_class: str, args: Sequence[str], *, heap: str, log4j_config: Path,
                 class_data: Sequence[str] | None = None, jvm: Sequence[str] = KAFKA_GC) -> list[str]:
    """`java ... <main_class> <args>` with Kafka's classpath, a small heap and `jvm`'s collector and compiler
    options (Kafka's GC settings by default); `class_data`: the class data sharing options (default: the
    archive `make jars` made, if any; class_data_sharing.py)."""
    return [
        java_executable(),
        *(using(KAFKA_ARCHIVE) if class_data is None else class_data),
        f"-Xmx{heap}",
        *jvm,
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j_config}",
        "-cp",
        kafka_classpath(),
        main_class,
        *args,
    ]


def _die_with_parent() -> Callable[[], None]:
    """A preexec_fn that makes the kernel SIGKILL the child when the starting thread dies."""
    parent_pid = os.getpid()
    # Resolve the symbol before fork: dlsym in the child could block on a loader lock that another
    # thread of the parent (Spark's py4j threads, say) held at fork time.
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl; then nobody would ever signal us.
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


def spawn_tied_to_parent(
    cmd: Sequence[str], *, stdout: int | object, stderr: int | object, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start `cmd` in its own process group (so it can be stopped as a group), killed with its parent."""
    return subprocess.Popen(
        list(cmd),
        stdin=subprocess.DEVNULL,
        stdout=stdout,  # type: ignore[arg-type]
        stderr=stderr,  # type: ignore[arg-type]
        cwd=cwd,
        start_new_session=True,
        preexec_fn=_die_with_parent(),
    )


def run_kafka_tool(
    main_class: str, args: Sequence[str], timeout: float = 120.0, *, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run a Kafka tool class (e.g. `kafka.tools.DumpLogSegments`) from the broker's classpath.

    Output is captured as text; tool logging goes to stderr at WARN. With `check`, a non-zero exit
    raises `subprocess.CalledProcessError` (whose `stderr` holds the reason).
    """
    cmd = java_command(main_class, args, heap=TOOL_HEAP, log4j_config=tools_log4j_config())
    return subprocess.run(
        cmd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
        preexec_fn=_die_with_parent(),
    )


# --------------------------------------------------------------------------- topics


# --------------------------------------------------------------------------- the broker


def random_cluster_id() -> str:
    """A KRaft cluster id as `kafka-storage random-uuid` makes it (URL-safe base64, no padding)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):  # Kafka's Uuid avoids these: they read as CLI flags
            return cluster_id


def tail_lines(path: Path, lines: int) -> str:
    """The last `lines` lines of a log file (from its last 64 KiB), or a note that it does not exist."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            text = handle.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return f"({path} does not exist)"
    return "\n".join(text.splitlines()[-lines:])


class LocalKafka:
    """One Apache Kafka broker+controller on 127.0.0.1, with its state under `work_dir`."""

    NODE_ID = 1

    def __init__(
        self,
        work_dir: str | os.PathLike[str],
        port: int | None = None,
        broker_properties: Mapping[str, object] | None = None,
        *,
        heap: str = BROKER_HEAP,
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
        limits: IngressLimits | None = None,
        controller_port: int | None = None,
        format_args: Sequence[str] = (),
        client_config: Mapping[str, str] | None = None,
        class_data: Sequence[str] | None = None,
        jvm: Sequence[str] = KAFKA_GC,
    ) -> None:
        """A broker on `port` (plaintext by default).

        A secured broker overrides `listeners` (and the rest) in `broker_properties`; then `port` is
        the port of the listener clients use (`bootstrap_servers`, the readiness check, `admin()`), and
        `client_config` holds what a client needs on that listener, in the keys of the gateway's `kafka`
        block (librdkafka's names, kafka_cluster/security.py: security.protocol, sasl.mechanism,
        sasl.username, sasl.password, ssl.ca.location, ...). `controller_port` lets the caller name the
        KRaft controller listener's port in its own properties. `format_args` are appended to `kafka-storage format` (e.g. KIP-900's
        `--add-scram 'SCRAM-SHA-512=[name=admin,password=...]'`, the only way to have SCRAM users
        before the broker can serve the AlterUserScramCredentials request that would create them).
        `class_data`: the broker JVM's class data sharing options, `jvm` its collector and compiler options
        (`java_command`; QUICK_START_JVM for a broker that serves a demo).
        """
        self.class_data = class_data
        self.jvm = tuple(jvm)
        self.work_dir = Path(work_dir).resolve()
        # The gateway's hops through this broker (contract.limits): the default is the default
        # gateway's (front door requests up to Kafka's socket.request.max.bytes).
        self.limits = limits or IngressLimits()
        self.port = port if port is not None else free_port()
        self.controller_port = controller_port if controller_port is not None else free_port()
        self.extra_properties = {k: str(v) for k, v in (broker_properties or {}).items()}
        self.format_args = tuple(format_args)
        self.client_config = dict(client_config or {})
        self.heap = heap
        self.start_timeout = start_timeout
        self.cluster_id: str | None = None
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    # ---- paths and addresses

    @property
    def bootstrap_servers(self) -> str:
        """The address clients use: the listener on `port`."""
        return f"127.0.0.1:{self.port}"

    @property
    def cluster(self) -> KafkaCluster:
        """This broker as the gateway reaches it (`client_config` read as the gateway's `kafka` block)."""
        return KafkaCluster(self.bootstrap_servers, load_kafka_security(self.client_config))

    @property
    def log_path(self) -> Path:
        """The broker's own log (log4j2)."""
        return self.work_dir / "broker.log"

    @property
    def stdout_path(self) -> Path:
        """What the JVM prints outside log4j2 (crashes, JVM warnings)."""
        return self.work_dir / "broker.stdout.log"

    @property
    def properties_path(self) -> Path:
        return self.work_dir / "server.properties"

    @property
    def log_dir(self) -> Path:
        return self.work_dir / "kraft-logs"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 60) -> str:
        """The end of the broker log and of the JVM's own output, for error messages."""
        return (
            f"--- {self.log_path} (last {lines} lines) ---\n{tail_lines(self.log_path, lines)}\n"
            f"--- {self.stdout_path} (last {lines} lines) ---\n{tail_lines(self.stdout_path, lines)}"
        )

    # ---- configuration

    def server_properties(self) -> dict[str, str]:
        """Broker+controller settings for one node; `broker_properties` given to the constructor win."""
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.NODE_ID),
            "controller.quorum.voters": f"{self.NODE_ID}@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.log_dir),
            # one node: every internal topic must be satisfiable with one replica
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            # the 50-partition default makes the first consumer group wait for 50 leaders
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0",
            # One node is its own controller: fencing itself takes every leader away and helps nobody. On a
            # machine starved of CPU or disk its heartbeats arrive late, so it waits far past Kafka's 9 s.
            "broker.session.timeout.ms": "60000",
            "auto.create.topics.enable": "false",
            "num.partitions": "1",
            # an ingress message or dead letter as large as the largest batch the gateway may get
            **self.limits.broker_properties(),
        }
        props.update(self.extra_properties)
        return props

    def _write_config(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        lines = [f"{key}={value}" for key, value in self.server_properties().items()]
        self.properties_path.write_text("\n".join(lines) + "\n")
        (self.work_dir / "log4j2.xml").write_text(log4j2_config(self.log_path))

    def _format_storage(self) -> None:
        """`kafka-storage format` once; a restart reuses the formatted dir (and its cluster id)."""
        meta = self.log_dir / "meta.properties"
        if meta.exists():
            for line in meta.read_text().splitlines():
                if line.startswith("cluster.id="):
                    self.cluster_id = line.partition("=")[2].strip()
            return
        self.cluster_id = random_cluster_id()
        # With controller.quorum.voters set (a static quorum) no --standalone/--initial-controllers.
        result = run_kafka_tool(
            "kafka.tools.StorageTool",
            ["format", "--cluster-id", self.cluster_id, "--config", str(self.properties_path), *self.format_args],
            timeout=120.0,
        )
        if result.returncode != 0:
            raise BrokerStartError(
                f"kafka-storage format failed (exit {result.returncode}):\n{result.stdout}\n{result.stderr}"
            )

    # ---- lifecycle

    def start(self) -> LocalKafka:
        """Format (first time), start the JVM and wait until the broker serves metadata."""
        if self.is_running():
            return self
        began = time.monotonic()
        self._write_config()
        self._format_storage()
        cmd = java_command(
            "kafka.Kafka",
            [str(self.properties_path)],
            heap=self.heap,
            log4j_config=self.work_dir / "log4j2.xml",
            class_data=self.class_data,
            jvm=self.jvm,
        )
        with self.stdout_path.open("ab") as out:  # the child keeps its own copy of the descriptor
            self._proc = spawn_tied_to_parent(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=self.work_dir)
        _LIVE.add(self)
        try:
            self._wait_until_ready(began + self.start_timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        log.info(
            "Kafka broker pid %s up at %s in %.1fs (log %s)",
            self.pid,
            self.bootstrap_servers,
            self.startup_seconds,
            self.log_path,
        )
        return self

    def _wait_until_ready(self, deadline: float) -> None:
        """Poll until AdminClient.list_topics sees this broker; fail at once if the JVM exits."""
        self._wait_for_port(deadline)
        admin = AdminClient(self.cluster.client(
            {
                # librdkafka backs off up to 10 s between reconnects by default; we poll tightly
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 200,
                "logger": logging.getLogger(f"{__name__}.librdkafka"),
            }
        ))
        while True:
            self._raise_if_exited()
            try:
                metadata = admin.list_topics(timeout=min(2.0, max(0.1, remaining_s(deadline))))
                if self.NODE_ID in metadata.brokers:  # listed only once the broker is unfenced
                    return
            except KafkaException:
                pass
            if time.monotonic() >= deadline:
                raise BrokerStartError(
                    f"Kafka broker did not answer on {self.bootstrap_servers} within "
                    f"{self.start_timeout:.0f}s\n{self.log_tail()}"
                )
            self._wait_for_exit(0.1)

    def _wait_for_port(self, deadline: float) -> None:
        """Wait until the client listener accepts TCP, so librdkafka does not log refusals."""
        while True:
            self._raise_if_exited()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
                    return
            except OSError:
                pass
            if time.monotonic() >= deadline:
                raise BrokerStartError(
                    f"Kafka broker did not listen on {self.bootstrap_servers} within "
                    f"{self.start_timeout:.0f}s\n{self.log_tail()}"
                )
            self._wait_for_exit(0.1)

    def _wait_for_exit(self, seconds: float) -> None:
        """Pause between polls by waiting on the process, so a crash ends the pause at once."""
        assert self._proc is not None
        try:
            self._proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            pass

    def _raise_if_exited(self) -> None:
        assert self._proc is not None
        code = self._proc.poll()
        if code is not None:
            raise BrokerStartError(f"Kafka broker exited with code {code} during start-up\n{self.log_tail()}")

    def stop(self, timeout: float = DEFAULT_STOP_TIMEOUT_S) -> None:
        """SIGTERM the broker's process group (clean shutdown), SIGKILL it if it outlives `timeout`."""
        proc, self._proc = self._proc, None
        _LIVE.discard(self)
        if proc is None:
            return
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                log.warning("Kafka broker pid %s ignored SIGTERM for %.0fs; killing it", proc.pid, timeout)
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait(timeout=timeout)

    def kill(self) -> None:
        """SIGKILL the broker (a crash: no clean shutdown, log recovery on next start)."""
        proc, self._proc = self._proc, None
        _LIVE.discard(self)
        if proc is not None:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait(timeout=DEFAULT_STOP_TIMEOUT_S)

    def create_topics(self, specs: Iterable[TopicSpec], timeout: float = 60.0) -> None:
        """`create_topics` against this broker, as `client_config`'s principal."""
        create_topics(self.cluster, specs, timeout)

    def admin(self) -> AdminClient:
        return AdminClient(self.cluster.client())

    def __enter__(self) -> LocalKafka:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.is_running() else "stopped"
        return f"LocalKafka({self.bootstrap_servers}, {state}, {self.work_dir})"


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


_LIVE: set[LocalKafka] = set()


@atexit.register
def _stop_all() -> None:
    """Interpreter exit (also after Ctrl-C): stop every broker this process started."""
    for kafka in list(_LIVE):
        kafka.stop(timeout=10.0)
