"""Group consumers of real clients for the tests, one interface for each: librdkafka (confluent-kafka, in
process), the Java client (`java/GroupConsumer.java`, a JVM per member), kafkajs (`node/group_consumer.js`,
`make setup` installs it) and franz-go (`go/group_consumer`), the last three driven through stdin and read
through their JSON lines. Each records what it was assigned and every record it read; `until` polls them
all until a condition on the group's own progress holds (never a fixed duration)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol
from xml.sax.saxutils import quoteattr

from confluent_kafka import Consumer, KafkaError, TopicPartition

from embedded.local_kafka import KAFKA_JARS_DIR, java_executable, kafka_classpath

JAVA_SOURCE = Path(__file__).parent / "java" / "GroupConsumer.java"
JAVA_CLASS = "GroupConsumer"
NODE_DIR = Path(__file__).parent / "node"
GO_GROUP_CONSUMER = Path(__file__).parent / "go" / "bin" / "group_consumer"
SESSION_MS = 6_000  # Kafka's group.min.session.timeout.ms
# the Java client's assignors by the names librdkafka gives the same protocols
JAVA_ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    "sticky": "org.apache.kafka.clients.consumer.StickyAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}


class GroupMember(Protocol):
    name: str
    assigned: set[int]
    read: dict[str, tuple[int, int]]  # value -> (partition, offset)
    duplicates: list[str]

    def poll(self) -> None: ...

    def close(self) -> None: ...


class LibrdkafkaMember:
    """Commits synchronously after each record it reads (so whatever it read is committed)."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, assignor: str = "range",
                 **config: Any) -> None:
        self.name = name
        self.assigned: set[int] = set()
        self.read: dict[str, tuple[int, int]] = {}
        self.duplicates: list[str] = []
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "partition.assignment.strategy": assignor, "session.timeout.ms": SESSION_MS,
                                  "heartbeat.interval.ms": 500, **config})
        self.cooperative = assignor == "cooperative-sticky"
        self.consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke)

    def _assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self.cooperative:
            consumer.incremental_assign(partitions)
            self.assigned |= {tp.partition for tp in partitions}
        else:
            self.assigned = {tp.partition for tp in partitions}

    def _revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self.cooperative:
            consumer.incremental_unassign(partitions)
            self.assigned -= {tp.partition for tp in partitions}
        else:
            self.assigned = set()

    def poll(self) -> None:
        m = self.consumer.poll(0.1)
        if m is None:
            return
        if m.error() is not None:
            assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
            return
        value = m.value().decode()
        if value in self.read:
            self.duplicates.append(value)
        self.read[value] = (m.partition(), m.offset())
        self.consumer.commit(message=m, asynchronous=False)

    def close(self) -> None:
        self.consumer.close()


class ProcessMember:
    """A group consumer in a process of its own, read through its JSON lines (`java/GroupConsumer.java`,
    `node/group_consumer.js`); `assignment_replaces`: its "assigned" event is the whole assignment (kafkajs)
    rather than partitions added (the Java client's rebalance listener)."""

    assignment_replaces = False

    def __init__(self, name: str, cmd: Sequence[str]) -> None:
        self.name = name
        self.assigned: set[int] = set()
        self.read: dict[str, tuple[int, int]] = {}
        self.duplicates: list[str] = []
        self.events: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            with self._lock:
                self.events.append(event)
                kind = event["event"]
                if kind == "assigned":
                    self.assigned = set(event["partitions"]) | (set() if self.assignment_replaces else self.assigned)
                elif kind in ("revoked", "lost"):
                    self.assigned -= set(event["partitions"])
                elif kind == "record":
                    if event["value"] in self.read:
                        self.duplicates.append(event["value"])
                    self.read[event["value"]] = (event["partition"], event["offset"])
                elif kind == "error":
                    self.errors.append(event["message"])

    def poll(self) -> None:
        assert self.proc.poll() is None or self.closed, f"{self.name} exited: {self.events[-3:]}"

    @property
    def closed(self) -> bool:
        with self._lock:
            return any(e["event"] == "closed" for e in self.events)

    def all_committed(self) -> bool:
        """Nothing read since its last commit."""
        with self._lock:
            kinds = [e["event"] for e in self.events if e["event"] in ("record", "committed")]
        return not kinds or kinds[-1] == "committed"

    def close(self) -> None:
        """Closes the consumer (a dynamic member leaves the group) and waits for the JVM to end."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("close\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=60)

    def crash(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


def client_log_config(log_file: Path) -> str:
    """log4j2 for a Java client whose stdout is its output: the log to a file, INFO, and every request it
    sends and response it gets (NetworkClient at DEBUG)."""
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <File name="file" fileName={quoteattr(str(log_file))}>
      <PatternLayout pattern="[%d{{ISO8601}}] %-5p [%t] %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Logger name="org.apache.kafka.clients.NetworkClient" level="DEBUG"/>
    <Root level="INFO"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
"""


class JavaMember(ProcessMember):
    """The Java client's KafkaConsumer in its own JVM (commitSync after every poll with records); its client
    log in `log_file` (beside the compiled classes), requests and responses included."""

    def __init__(self, classes: Path, bootstrap: str, group: str, topic: str, name: str, assignor: str = "range",
                 instance_id: str | None = None, settings: Sequence[str] = ()) -> None:
        self.log_file = classes.parent / f"{name}-{uuid.uuid4().hex[:8]}.log"
        config = self.log_file.with_suffix(".xml")
        config.write_text(client_log_config(self.log_file))
        super().__init__(name, [
            java_executable(), f"-Dlog4j2.configurationFile={config}", "-cp",
            f"{classes}:{kafka_classpath(KAFKA_JARS_DIR)}", JAVA_CLASS, bootstrap, group,
            topic, JAVA_ASSIGNORS[assignor], instance_id or "-", f"client.id={name}",
            f"session.timeout.ms={SESSION_MS}", "heartbeat.interval.ms=500", *settings])


class KafkajsMember(ProcessMember):
    """kafkajs (Node) with the round-robin assignor under librdkafka's and Java's protocol name."""

    assignment_replaces = True

    def __init__(self, bootstrap: str, group: str, topic: str, name: str) -> None:
        assert (NODE_DIR / "node_modules" / "kafkajs").is_dir(), f"kafkajs not installed: run `make setup` ({NODE_DIR})"
        super().__init__(name, ["node", str(NODE_DIR / "group_consumer.js"), bootstrap, group, topic, name])


class FranzGoMember(ProcessMember):
    """franz-go (`go/group_consumer`, `make go` builds it) with the range balancer; its "assigned" events add
    partitions, as the Java client's listener does."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str,
                 metadata_max_age_ms: int | None = None) -> None:
        assert GO_GROUP_CONSUMER.exists(), f"{GO_GROUP_CONSUMER} is missing: `make go` builds it"
        super().__init__(name, [str(GO_GROUP_CONSUMER), bootstrap, group, topic, name,
                                *([] if metadata_max_age_ms is None else [str(metadata_max_age_ms)])])


def compile_java_client(work: Path, source: Path) -> Path:
    """`source` (a test program of the Java client's) compiled by the JDK's javac into `work`/classes."""
    classes = work / "classes"
    javac = Path(java_executable()).resolve().parent / "javac"
    done = subprocess.run([str(javac), "-Xlint:all", "-Werror", "-cp", kafka_classpath(KAFKA_JARS_DIR), "-d",
                           str(classes), str(source)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"javac failed:\n{done.stdout}\n{done.stderr}"
    return classes


def compile_group_consumer(work: Path) -> Path:
    return compile_java_client(work, JAVA_SOURCE)


def until(condition: Callable[[], bool], members: Sequence[GroupMember], what: str, timeout_s: float = 120) -> None:
    """Poll every member until `condition()` holds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}: " + "; ".join(
            f"{m.name} assigned {sorted(m.assigned)} read {len(m.read)}" for m in members)
        for m in members:
            m.poll()
        if not any(isinstance(m, LibrdkafkaMember) for m in members):
            time.sleep(0.05)  # the JVMs poll on their own; this loop only looks at what they printed


def split(members: Sequence[GroupMember], partitions: int) -> bool:
    """Every partition owned by exactly one member, and every member owning some."""
    owned = [p for m in members for p in m.assigned]
    return sorted(owned) == list(range(partitions)) and all(m.assigned for m in members)
