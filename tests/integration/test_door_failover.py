"""Three front doors as processes of their own (`gateway door`, one node each, on one doors topic), an active
driver and a standby without doors of their own; three idempotent producers of real clients (librdkafka, the
Java client, franz-go: `steady_producers.py`) bootstrapped from all three doors, and a consumer group of three
members (librdkafka, the Java client and franz-go) reading through them. The standby is ready (rehearsed on its scratch topic) while the ingress topic is still empty.
Mid-stream, the door coordinating the group is killed with kill -9, then the active driver. What must hold:
every record acknowledged is stored exactly once and in order per partition and client, nothing is left
unacknowledged, and the group continues from its commits under its new coordinator (a later member of the
group reads exactly what was produced after the first one left), and the standby's query starts only after
it took the driver lock. Reported (`pytest -s`), not asserted: for each client, each kill -> its first
acknowledgement of a record sent after it, and the p99 produce round trip around each fault.
"""

from __future__ import annotations

import collections
import re
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from front_door.cluster.door_cluster import MAX_NODES_PER_DOOR
from storage.log_reader import read
from streaming.config import GatewayConfig
from tests.integration.fault_harness import GatewayDriver, _wait_for
from tests.integration.gateway_io import create_gateway_topics
from tests.integration.group_members import JAVA_SOURCE as GROUP_CONSUMER_SOURCE
from tests.integration.group_members import FranzGoMember, JavaMember, ProcessMember, compile_java_client
from tests.integration.ports import free_ports
from tests.integration.standby_harness import DOOR_PARTITIONS, DOOR_TOPIC, door_process_configs
from tests.integration.steady_producers import (
    JAVA_SOURCE,
    SteadyProducer,
    franz_go_producer,
    java_producer,
    librdkafka_producer,
)

DOORS = 3
GROUP = "readers"
SESSION_TIMEOUT_MS = 6000  # the doors' front_door_session_timeout_ms: a killed door is fenced after it
# A client of several doors learns a fenced door's partitions' new leaders from its next Metadata: refreshed
# every 10 s, as docs/deployment.md advises, not the clients' default 5 min
METADATA_REFRESH_MS = 10_000
CLIENT_METADATA = {"topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS}


class GroupReader:
    """A consumer of the door topic in GROUP, through the doors, committing every second; values kept, and
    librdkafka's last group, fetch and metadata log lines (for a failure's message). Its metadata is refreshed
    every 10 s, as clients of several doors are advised (docs/deployment.md)."""

    def __init__(self, bootstrap: str) -> None:
        self.log = _Recent()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                                  "auto.commit.interval.ms": 1000, **CLIENT_METADATA,
                                  "debug": "cgrp,metadata", "logger": self.log})
        self.consumer.subscribe([DOOR_TOPIC])
        self.values: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                self.values.append(bytes(msg.value()).decode())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()  # commits what it read, through the group's coordinator


class _Recent:
    """The last lines librdkafka logged."""

    def __init__(self) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=60)

    def log(self, _level: int, fmt: str, *args: object) -> None:
        self.lines.append(fmt % args if args else fmt)


def _acked_after(producer: SteadyProducer, moment: float) -> int:
    return sum(1 for sent, _ in list(producer.acked.values()) if sent > moment)


def test_killed_doors_and_drivers_lose_and_double_nothing(gateway_config: GatewayConfig, tmp_path: Path) -> None:
    config = gateway_config.with_overrides(shuffle_partitions=1, restart_backoff_initial_s=0.5,
                                           restart_backoff_max_s=4.0, doors_topic=f"doors-{uuid.uuid4().hex[:8]}",
                                           front_door_nodes=1, front_door_session_timeout_ms=SESSION_TIMEOUT_MS)
    active_config, standby_config, door_config = door_process_configs(config, tmp_path)
    create_gateway_topics(door_config)
    java_classes = compile_java_client(tmp_path / "java", JAVA_SOURCE)
    compile_java_client(tmp_path / "java", GROUP_CONSUMER_SOURCE)
    addresses = [f"127.0.0.1:{free_ports(1)}" for _ in range(DOORS)]
    doors = [GatewayDriver(door_config.with_overrides(front_door_address=address, front_door_id=i + 1,
                                                      metrics_address="127.0.0.1:0"), tmp_path, f"door{i + 1}",
                           command="door") for i, address in enumerate(addresses)]
    active = GatewayDriver(active_config, tmp_path, "active")
    standby = GatewayDriver(standby_config, tmp_path, "standby", ("--standby",))
    producers: list[SteadyProducer] = []
    readers: list[GroupReader] = []
    members: list[ProcessMember] = []  # the Java client's and franz-go's members of the group
    try:
        for door in doors:
            door.start()
        active.start()
        standby.start()
        for door in doors:
            _wait_for(lambda door=door: door.logged(f"{DOORS} live door(s)"), f"{door.log_path.name} to see all "
                      "doors", 120)
        _wait_for(lambda: standby.logged("standby: ready"), "the standby to be ready", 300)
        bootstrap = ",".join(addresses)
        producers += [
            librdkafka_producer(bootstrap, DOOR_TOPIC, "librdkafka", DOOR_PARTITIONS, tmp_path / "librdkafka.log",
                                debug="eos,topic,metadata,broker,protocol", **CLIENT_METADATA),
            java_producer(java_classes, bootstrap, DOOR_TOPIC, "java", DOOR_PARTITIONS,
                          **{"metadata.max.age.ms": METADATA_REFRESH_MS}),
            franz_go_producer(bootstrap, DOOR_TOPIC, "franz-go", DOOR_PARTITIONS,
                              metadata_max_age_ms=METADATA_REFRESH_MS)]
        readers.append(GroupReader(bootstrap))
        members += [JavaMember(java_classes, bootstrap, GROUP, DOOR_TOPIC, "java-reader",
                               settings=(f"metadata.max.age.ms={METADATA_REFRESH_MS}",)),
                    FranzGoMember(bootstrap, GROUP, DOOR_TOPIC, "franz-go-reader",
                                  metadata_max_age_ms=METADATA_REFRESH_MS)]

        def every_client(moment: float, count: int, what: str, timeout_s: float) -> None:
            try:
                _wait_for(lambda: all(_acked_after(p, moment) >= count for p in producers), what, timeout_s)
            except TimeoutError as e:
                raise TimeoutError(f"{e}: " + "; ".join(
                    f"{p.name} {_acked_after(p, moment)} acknowledged, errors {p.errors[-3:]}, exit {p.proc.poll()}"
                    for p in producers)) from None

        every_client(0, 100, "records produced through the doors by every client", 180)
        _wait_for(lambda: len(readers[0].values) >= 20 and all(len(m.read) >= 20 for m in members),
                  "records read through the doors by every member of the group", 120)

        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a dropped handle never answers
        coordinator = admin.describe_consumer_groups([GROUP])[GROUP].result(timeout=60).coordinator.id
        victim = doors[(coordinator - 1) // MAX_NODES_PER_DOOR]
        survivors = [d for d in doors if d is not victim]
        victim.kill()
        door_killed = time.time()
        every_client(door_killed, 100, "records of every client after the door's kill", 180)
        for door in survivors:
            _wait_for(lambda door=door: f"{DOORS - 1} live door(s)" in door.log(), "the killed door fenced", 60)

        active.kill()
        driver_killed = time.time()
        every_client(driver_killed, 100, "records of every client after the driver's kill", 300)
        for p in producers:
            unacknowledged = p.stop(120)
            assert unacknowledged == [], (f"{p.name}: {len(unacknowledged)} unacknowledged, {unacknowledged[:3]} "
                                          f"(its log: {p.log_path})")
            assert p.errors == [], f"{p.name}: {p.errors[:3]}"
        acked = {v for p in producers for v in p.acked}

        def group_read() -> set[str]:
            return set(readers[0].values).union(*(m.read for m in members))

        try:
            _wait_for(lambda: group_read() >= acked, "the group to read every record", 180)
        except TimeoutError as e:  # which partitions the reader fell behind on
            missing = sorted(acked - group_read())
            raise TimeoutError(f"{e}: {len(missing)} of {len(acked)} unread (first {missing[:3]}); read "
                               f"{len(readers[0].values)}; assignment {readers[0].consumer.assignment()}; "
                               "librdkafka's last lines:\n" + "\n".join(readers[0].log.lines)) from None
        readers[0].close()
        for member in members:
            member.close()  # it committed what it read after each poll, and leaves the group

        # a later member of the group starts from the commits the new coordinator took over
        later = librdkafka_producer(bootstrap, DOOR_TOPIC, "later", DOOR_PARTITIONS, **CLIENT_METADATA)
        producers.append(later)
        _wait_for(lambda: len(later.acked) >= 20, "records after the first reader left", 120)
        assert later.stop(60) == []
        readers.append(GroupReader(bootstrap))
        _wait_for(lambda: set(later.acked) <= set(readers[1].values), "the later member to read them", 180)
        assert set(readers[1].values) == set(later.acked)  # nothing read again: the commits held

        root = config.path(config.segments_root)
        by_partition = [[r.value.decode() for r in read(root, DOOR_TOPIC, p, 0, 10**6)]
                        for p in range(DOOR_PARTITIONS)]
        stored = [v for values in by_partition for v in values]
        sent = [v for p in producers for v in p.sent]
        assert sorted(stored) == sorted(sent) == sorted(v for p in producers for v in p.acked)  # each once
        for p in producers:  # each client's records in the order it sent them
            assert all([v for v in values if v.startswith(f"{p.prefix}-")] ==
                       sorted(v for v in values if v.startswith(f"{p.prefix}-")) for values in by_partition), p.name
        figures = {f"{p.name}": (f"door kill -> first ack {p.first_ack_after(door_killed):.1f} s, p99 "
                                 f"{p.p99_round_trip_ms(door_killed, door_killed + 10)} ms; driver kill -> first ack "
                                 f"{p.first_ack_after(driver_killed):.1f} s, p99 "
                                 f"{p.p99_round_trip_ms(driver_killed, driver_killed + 10)} ms")
                   for p in producers[:3]}
        print(f"\n[fault] doors and drivers killed ({len(stored)} records): "
              + "; ".join(f"{k}: {v}" for k, v in figures.items()))
        log = standby.log()
        assert re.search(r"the query's plan rehearsed in [\d.]+ s", log), log[-3000:]  # warm on an empty topic
        assert log.index("taking over") < log.index("gateway query")  # its query starts after the lock
        assert standby.stop() == 0, log[-3000:]
        for door in survivors:
            assert door.stop() == 0, door.log()[-3000:]
    finally:
        for producer in producers:
            producer.kill()
        for reader in readers:
            reader._stop.set()
        for member in members:
            if member.proc.poll() is None:
                member.crash()
        for process in (*doors, active, standby):
            if process.proc is not None and process.proc.poll() is None:
                process.kill()
