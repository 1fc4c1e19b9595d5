"""Kafka Connect 4.2.1 in distributed mode, unchanged, through the front door: the worker creates its config,
offset and status topics itself (CreateTopics, compacted), joins its group through the door, and a
FileStreamSource connector carries a file's lines through a topic (which Connect creates too, `topic.creation.*`)
to a FileStreamSink connector's file, in order. Stopped gracefully and started again, the worker reads its
connectors back from the config topic and carries on where its committed offsets say: the lines appended
meanwhile arrive, and none twice."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.integration.connect_worker import FILE_SINK, FILE_SOURCE, ConnectWorker, InternalTopics
from tests.integration.front_door_harness import RunningDoor, running_front_door
from tests.integration.polling import until
from tests.integration.ports import free_ports

pytestmark = pytest.mark.integration

FIRST_LINES = 300
MORE_LINES = 200
# Connect commits source offsets (the file position) and sink offsets every interval and when a task stops; a
# short one keeps what a crash could replay small. The graceful stop below commits everything anyway.
OFFSET_FLUSH_MS = "500"


@pytest.fixture
def door(spark, gateway_config) -> Iterator[RunningDoor]:
    with running_front_door(spark, gateway_config) as running:
        yield running


def _lines(first: int, count: int) -> list[str]:
    return [f"line {i:05d} of the source file" for i in range(first, first + count)]


def _append(path: Path, lines: list[str]) -> None:
    with path.open("a") as f:
        f.write("".join(f"{line}\n" for line in lines))


def _sink_lines(path: Path) -> list[str]:
    """The sink file's complete lines (the sink may be mid-line)."""
    if not path.exists():
        return []
    text = path.read_text()
    return text.split("\n")[:-1]


def _healthy(worker: ConnectWorker) -> bool:
    """Both connectors' status looked at, so a FAILED task fails the wait at once with its trace."""
    worker.running("source")
    worker.running("sink")
    return True


def test_connect_distributed_carries_a_file_through_the_door_across_a_restart(door: RunningDoor,
                                                                               tmp_path: Path) -> None:
    run = uuid.uuid4().hex[:8]
    topics = InternalTopics(f"connect-configs-{run}", f"connect-offsets-{run}", f"connect-status-{run}")
    data_topic = f"file-lines-{run}"
    source_file, sink_file = tmp_path / "source.txt", tmp_path / "sink.txt"
    written = _lines(0, FIRST_LINES)
    _append(source_file, written)

    worker = ConnectWorker(tmp_path / "worker", door.bootstrap, f"connect-{run}", topics, free_ports(1),
                           {"offset.flush.interval.ms": OFFSET_FLUSH_MS})
    try:
        worker.start()
        worker.wait_ready()
        # the data topic created by Connect through the door as well: one partition, so the lines keep their order
        worker.put_connector("source", {"connector.class": FILE_SOURCE, "tasks.max": "1", "file": str(source_file),
                                        "topic": data_topic, "topic.creation.default.partitions": "1",
                                        "topic.creation.default.replication.factor": "1"})
        worker.wait_running("source")
        until(lambda: door.registry.topic(data_topic) is not None, f"Connect to create {data_topic}",
              detail=worker.log_tail)
        worker.put_connector("sink", {"connector.class": FILE_SINK, "tasks.max": "1", "file": str(sink_file),
                                      "topics": data_topic})
        worker.wait_running("sink")
        until(lambda: _healthy(worker) and len(_sink_lines(sink_file)) >= FIRST_LINES, f"{FIRST_LINES} lines in the sink file",
              timeout_s=180, detail=lambda: f"{len(_sink_lines(sink_file))} lines\n{worker.log_tail()}")
        assert _sink_lines(sink_file) == written

        # the worker's own topics, made through the door's CreateTopics: in the registry and in Metadata, compacted
        admin = AdminClient({"bootstrap.servers": door.bootstrap})
        listed = admin.list_topics(timeout=30).topics
        for name in topics.names():
            spec = door.registry.topic(name)
            assert spec is not None, f"{name} is not in the registry"
            assert spec.configs.get("cleanup.policy") == "compact", spec
            assert name in listed and listed[name].error is None
        assert door.registry.topic(topics.configs).partitions == 1  # type: ignore[union-attr]  # Connect requires it
        described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, n) for n in topics.names()])
        for resource, future in described.items():
            assert future.result(timeout=30)["cleanup.policy"].value == "compact", resource

        assert worker.stop() in (0, 143)  # 143: the JVM's exit after its shutdown hooks ran on SIGTERM
        more = _lines(FIRST_LINES, MORE_LINES)
        _append(source_file, more)
        written += more

        worker.start()  # the connectors come back from the config topic, the positions from the offsets topic
        worker.wait_ready()
        worker.wait_running("source")
        worker.wait_running("sink")
        # a replayed line would come before the appended ones (one partition, in order): the last line's arrival
        # means every copy is in the file
        until(lambda: _healthy(worker) and written[-1] in _sink_lines(sink_file), "the appended lines in the sink file", timeout_s=180,
              detail=lambda: f"{len(_sink_lines(sink_file))} lines\n{worker.log_tail()}")
        assert _sink_lines(sink_file) == written  # every line exactly once, in order
        assert worker.stop() in (0, 143)
    finally:
        worker.kill()
