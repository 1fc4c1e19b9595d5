"""Three front doors as processes of their own (`gateway door`, one node each, on one doors topic), an active
driver and a standby without doors of their own; an idempotent librdkafka producer bootstrapped from all three
doors and a consumer group reading through them. The standby is ready (rehearsed on its scratch topic) while
the ingress topic is still empty. Mid-stream, the door coordinating the group is killed with kill -9, then the
active driver. What must hold: every record acknowledged is stored exactly once and in order
per partition, nothing is left unacknowledged, and the group continues from its commits under its new
coordinator (a later member of the group reads exactly what was produced after the first one left), and the
standby's query starts only after it took the driver lock. Reported
(`pytest -s`), not asserted: each kill -> the producer's first acknowledgement of a record sent after it, and
the p99 produce round trip around each fault.
"""

from __future__ import annotations

import collections
import re
import statistics
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from front_door.door_cluster import MAX_NODES_PER_DOOR
from sinks.storage.log_reader import read
from streaming.config import GatewayConfig
from tests.integration.fault_harness import GatewayDriver, _wait_for
from tests.integration.gateway_io import create_gateway_topics
from tests.integration.ports import free_ports
from tests.integration.standby_harness import DOOR_PARTITIONS, DOOR_TOPIC, DoorProducer, door_process_configs

DOORS = 3
GROUP = "readers"
SESSION_TIMEOUT_MS = 6000  # the doors' front_door_session_timeout_ms: a killed door is fenced after it
# A client of several doors learns a fenced door's partitions' new leaders from its next Metadata: refreshed
# every 10 s, as docs/deployment.md advises, not librdkafka's default 5 min
CLIENT_METADATA = {"topic.metadata.refresh.interval.ms": 10_000}


class GroupReader:
    """A consumer of the door topic in GROUP, through the doors, committing every second; values kept, and
    librdkafka's last group, fetch and metadata log lines (for a failure's message). Its metadata is refreshed
    every 10 s, as clients of several doors are advised (docs/deployment.md)."""

    def __init__(self, bootstrap: str) -> None:
        self.log = _Recent()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                                  "auto.commit.interval.ms": 1000, **CLIENT_METADATA,
                                  "debug": "cgrp,fetch,metadata", "logger": self.log})
        self.consumer.subscribe([DOOR_TOPIC])
        self.values: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                self.values.append(bytes(msg.value()))

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


def _p99_round_trip_ms(producer: DoorProducer, start: float, end: float) -> float:
    trips = [(producer.delivered_at[v] - producer.sent_at[v]) * 1000 for v in producer.delivered_at
             if start <= producer.sent_at[v] < end]
    return round(statistics.quantiles(trips, n=100)[98], 1) if len(trips) >= 2 else float("nan")


def test_killed_doors_and_drivers_lose_and_double_nothing(gateway_config: GatewayConfig, tmp_path: Path) -> None:
    config = gateway_config.with_overrides(shuffle_partitions=1, restart_backoff_initial_s=0.5,
                                           restart_backoff_max_s=4.0, doors_topic=f"doors-{uuid.uuid4().hex[:8]}",
                                           front_door_nodes=1, front_door_session_timeout_ms=SESSION_TIMEOUT_MS)
    active_config, standby_config, door_config = door_process_configs(config, tmp_path)
    create_gateway_topics(door_config)
    addresses = [f"127.0.0.1:{free_ports(1)}" for _ in range(DOORS)]
    doors = [GatewayDriver(door_config.with_overrides(front_door_address=address, front_door_id=i + 1,
                                                      metrics_address="127.0.0.1:0"), tmp_path, f"door{i + 1}",
                           command="door") for i, address in enumerate(addresses)]
    active = GatewayDriver(active_config, tmp_path, "active")
    standby = GatewayDriver(standby_config, tmp_path, "standby", ("--standby",))
    producer: DoorProducer | None = None
    readers: list[GroupReader] = []
    try:
        for door in doors:
            door.start()
        active.start()
        standby.start()
        for door in doors:
            _wait_for(lambda door=door: f"{DOORS} live door(s)" in door.log(), f"{door.log_path.name} to see all "
                      "doors", 120)
        _wait_for(lambda: "standby: ready" in standby.log(), "the standby to be ready", 300)
        bootstrap = ",".join(addresses)
        producer = DoorProducer(bootstrap, **CLIENT_METADATA)
        readers.append(GroupReader(bootstrap))
        _wait_for(lambda: len(producer.delivered) >= 200 and len(readers[0].values) >= 50,
                  "records produced and read through the doors", 180)

        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a dropped handle never answers
        coordinator = admin.describe_consumer_groups([GROUP])[GROUP].result(timeout=60).coordinator.id
        victim = doors[(coordinator - 1) // MAX_NODES_PER_DOOR]
        survivors = [d for d in doors if d is not victim]
        victim.kill()
        door_killed = time.monotonic()
        delivered = len(producer.delivered)
        _wait_for(lambda: len(producer.delivered) > delivered + 200, "records after the door's kill", 180)
        for door in survivors:
            _wait_for(lambda door=door: f"{DOORS - 1} live door(s)" in door.log(), "the killed door fenced", 60)

        active.kill()
        driver_killed = time.monotonic()
        delivered = len(producer.delivered)
        _wait_for(lambda: len(producer.delivered) > delivered + 200, "records after the driver's kill", 300)
        assert producer.stop(120) == 0, f"undelivered by partition: {producer.undelivered()}"
        assert producer.errors == []
        try:
            _wait_for(lambda: set(readers[0].values) >= set(producer.delivered), "the group to read every record",
                      180)
        except TimeoutError as e:  # which partitions the reader fell behind on
            missing = sorted(set(producer.delivered) - set(readers[0].values))
            by_partition = {p: sum(1 for v in missing if int(v.split(b"-")[1]) % DOOR_PARTITIONS == p)
                            for p in range(DOOR_PARTITIONS)}
            raise TimeoutError(f"{e}: {len(missing)} of {len(producer.delivered)} unread (by partition "
                               f"{by_partition}; first {missing[:3]}); read {len(readers[0].values)}; "
                               f"assignment {readers[0].consumer.assignment()}; librdkafka's last lines:\n"
                               + "\n".join(readers[0].log.lines)) from None
        readers[0].close()

        # a later member of the group starts from the commits the new coordinator took over
        later = DoorProducer(bootstrap, prefix="later", **CLIENT_METADATA)
        _wait_for(lambda: len(later.delivered) >= 20, "records after the first reader left", 120)
        assert later.stop(60) == 0
        readers.append(GroupReader(bootstrap))
        _wait_for(lambda: set(later.delivered) <= set(readers[1].values), "the later member to read them", 180)
        assert set(readers[1].values) == set(later.delivered)  # nothing read again: the commits held

        root = config.path(config.segments_root)
        by_partition = [[r.value for r in read(root, DOOR_TOPIC, p, 0, 10**6)] for p in range(DOOR_PARTITIONS)]
        stored = [v for values in by_partition for v in values]
        sent = producer.sent + later.sent
        assert sorted(stored) == sorted(sent) == sorted(producer.delivered + later.delivered)  # each once
        assert all(values == sorted(values) for values in by_partition)  # in the order sent ("door-" < "later-")
        figures = {
            "door_kill_to_first_ack_s": round(producer.first_ack_after(door_killed), 1),
            "p99_round_trip_ms_10s_after_door_kill": _p99_round_trip_ms(producer, door_killed, door_killed + 10),
            "driver_kill_to_first_ack_s": round(producer.first_ack_after(driver_killed), 1),
            "p99_round_trip_ms_10s_after_driver_kill": _p99_round_trip_ms(producer, driver_killed, driver_killed + 10),
            "records": len(stored)}
        print("\n[fault] doors and drivers killed: " + ", ".join(f"{k}={v}" for k, v in figures.items()))
        log = standby.log()
        assert re.search(r"the query's plan rehearsed in [\d.]+ s", log), log[-3000:]  # warm on an empty topic
        assert log.index("taking over") < log.index("gateway query")  # its query starts after the lock
        assert standby.stop() == 0, log[-3000:]
        for door in survivors:
            assert door.stop() == 0, door.log()[-3000:]
    finally:
        if producer is not None:
            producer.stop(1)
        for reader in readers:
            reader._stop.set()
        for process in (*doors, active, standby):
            if process.proc is not None and process.proc.poll() is None:
                process.kill()
