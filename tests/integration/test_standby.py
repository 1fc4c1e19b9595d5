"""A standby driver on local Spark takes over a killed active one (`standby_harness.standby_failover`:
accounting, a librdkafka producer through a front door of its own (`gateway door`) that outlives the
driver, a third driver refused, the standby's query only after the lock). The figures (kill -> first
response to traffic sent after it, kill -> the producer's first acknowledgement) are printed (`pytest -s`),
not asserted; the standalone cluster's run, with each driver's own front door, is in test_faults.py.
"""

from __future__ import annotations

from pathlib import Path

from streaming.config import GatewayConfig
from tests.integration.gateway_io import create_gateway_topics
from tests.integration.standby_harness import door_process_configs, standby_failover


def test_standby_takes_over_a_killed_active_driver_behind_a_door_of_its_own(gateway_config: GatewayConfig, tmp_path: Path) -> None:
    config = gateway_config.with_overrides(shuffle_partitions=1, restart_backoff_initial_s=0.5,
                                           restart_backoff_max_s=4.0)
    create_gateway_topics(config)  # the response watch subscribes before the drivers start
    active, standby, door = door_process_configs(config, tmp_path)
    figures = standby_failover(active, standby, tmp_path, door=door)
    print("\n[fault] standby failover (local[2]): " + ", ".join(f"{k}={v}" for k, v in figures.items()))
