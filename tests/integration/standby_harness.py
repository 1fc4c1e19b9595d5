"""The standby failover scenario on the standalone cluster (test_faults.py; with front doors as processes of
their own on local Spark: test_door_failover.py): an active driver and a `--standby` one, both as an operator starts them, the standby ready
(and rehearsed, on its scratch topic) before any traffic; the active is killed with kill -9 (driver and JVM) mid-stream; the standby takes the driver lock, starts the front door
and the query from the checkpoint. What must hold: the fault tests' accounting for the ingress traffic,
an idempotent librdkafka producer (`steady_producers.py`) bootstrapped from both front doors delivering every record once and in
order through the failover, a third driver without `--standby` refused while one is active, and the
standby's query starting only after it took the lock. Reported: kill -> first response to traffic sent after
it, and kill -> the producer's first acknowledgement of a record sent after it.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from storage.log_reader import read
from streaming.config import REPO_ROOT, GatewayConfig
from tests.integration.fault_harness import GatewayDriver, ResponseWatch, _wait_for, account, send_wave
from tests.integration.ports import free_ports
from tests.integration.steady_producers import SteadyProducer, librdkafka_producer

# Spark's default log4j layout ("25/11/26 13:04:15 WARN Utils: ..."), which conf/log4j2.properties replaces
SPARK_DEFAULT_LINE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR) ", re.M)
ROUTINE_SPARK_WARNINGS = ("Disabling AQE", "spark.sql.adaptive.enabled is not supported", "Truncated the string",
                          "Cannot find active jobs for it", "native-hadoop")
DOOR_TOPIC = "door"  # the front-door producer's topic: the ingress waves' offsets stay theirs
DOOR_PARTITIONS = 4


def standby_configs(config: GatewayConfig, work_dir: Path) -> tuple[GatewayConfig, GatewayConfig]:
    """The active's and the standby's configs from one test config: the same query, checkpoint and storage,
    the door topic added to its registry, each driver its own front door (4 nodes) and metrics port."""
    topics = json.loads(Path(config.topics_file).read_text())
    topics["topics"][DOOR_TOPIC] = {"partitions": DOOR_PARTITIONS, "configs": {"message.timestamp.type": "LogAppendTime"}}
    topics_file = work_dir / "topics-door.json"
    topics_file.write_text(json.dumps(topics))
    active = config.with_overrides(topics_file=str(topics_file), metrics_address="127.0.0.1:0",
                                   front_door_address=f"127.0.0.1:{free_ports(4)}")
    return active, active.with_overrides(front_door_address=f"127.0.0.1:{free_ports(4)}")


def door_process_configs(config: GatewayConfig, work_dir: Path) -> tuple[GatewayConfig, GatewayConfig, GatewayConfig]:
    """The active's and the standby's configs without a front door of their own, and the config of a front
    door as its own process (`gateway door`) in front of both."""
    active, _ = standby_configs(config, work_dir)
    door = active.with_overrides(front_door_address=f"127.0.0.1:{free_ports(4)}")
    active = dataclasses.replace(active, front_door_address=None)  # with_overrides keeps a value for None
    return active, active, door


def _third_driver(config_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streaming", "run", "--config", str(config_path)],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)


def standby_failover(config: GatewayConfig, standby_config: GatewayConfig, work_dir: Path,
                     start_timeout_s: float = 300) -> dict[str, object]:
    """The scenario (module docstring); returns its figures, the accounting's among them."""
    watch = ResponseWatch(config)
    active = GatewayDriver(config, work_dir, "active").start()
    standby = GatewayDriver(standby_config, work_dir, "standby", ("--standby",)).start()
    producer: SteadyProducer | None = None
    try:
        # ready before any traffic, as on a fresh deployment: its rehearsal runs on its scratch topic
        _wait_for(lambda: standby.logged("standby: ready"), "the standby to be ready", start_timeout_s)
        first = send_wave(config, 200, 0)
        watch.wait_all(first, start_timeout_s)
        third_driver = _third_driver(GatewayDriver(standby_config, work_dir, "third").config_path)
        refusal = third_driver.stdout + third_driver.stderr
        assert third_driver.returncode == 2, refusal[-3000:]
        assert "another driver runs query" in refusal and f"pid {active.proc.pid}" in refusal  # type: ignore[union-attr]

        producer = librdkafka_producer(f"{config.front_door_address},{standby_config.front_door_address}", DOOR_TOPIC,
                                       "door", DOOR_PARTITIONS)
        _wait_for(lambda: len(producer.acked) >= 50, "records through the active's front door", 120)
        second = send_wave(config, 300, 10_000)
        _wait_for(lambda: watch.answered(second) >= 50, "part of the wave to be answered", 120)
        assert "taking over" not in standby.log()
        assert "gateway query" not in standby.log()  # two actives never run at once

        active.kill()
        killed, killed_at = time.monotonic(), time.time()
        third = send_wave(config, 300, 20_000)
        watch.wait_all(first + second + third, 300)
        to_response = watch.first_after(third) - killed
        try:
            _wait_for(lambda: sum(1 for sent, _ in list(producer.acked.values()) if sent > killed_at) >= 50,
                      "records through the standby's front door", 120)
        except TimeoutError as e:  # what the producer and the standby saw, for a failure that is rare
            raise TimeoutError(f"{e}; {len(producer.acked)} acknowledged, errors {producer.errors[-3:]}; the "
                               f"standby's log ends:\n{standby.log()[-4000:]}") from None
        assert producer.stop(120) == []
        assert producer.errors == []

        log = standby.log()
        assert log.index("taking over") < log.index("gateway query")  # its query starts after the lock
        assert standby.stop() == 0, log[-3000:]
        result = account(config, first + second + third)

        root = config.path(config.segments_root)
        by_partition = [[r.value.decode() for r in read(root, DOOR_TOPIC, p, 0, 10**6)] for p in range(DOOR_PARTITIONS)]
        stored = [v for values in by_partition for v in values]
        assert sorted(stored) == sorted(producer.sent) == sorted(producer.acked)  # each once, none lost
        assert all(values == sorted(values) for values in by_partition)  # in the order sent
        for driver_log in (active.log(), log):  # Spark's lines in the gateway's format, the routine ones left out
            assert not SPARK_DEFAULT_LINE.search(driver_log), SPARK_DEFAULT_LINE.findall(driver_log)[:3]
            assert not [w for w in ROUTINE_SPARK_WARNINGS if w in driver_log]
        ready = re.search(r"standby: ready ([\d.]+) s after start", log)
        assert re.search(r"the query's plan rehearsed in [\d.]+ s", log), log[-3000:]  # warm on an empty topic
        return {"kill_to_first_response_s": round(to_response, 1),
                "kill_to_first_door_ack_s": round(producer.first_ack_after(killed_at), 1),
                "standby_ready_after_start_s": float(ready.group(1)) if ready else None,
                "door_records": len(stored), **vars(result)}
    finally:
        watch.stop()
        if producer is not None:
            producer.kill()
        for driver in (active, standby):
            if driver.proc is not None and driver.proc.poll() is None:
                driver.kill()
