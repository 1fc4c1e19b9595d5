"""conf/standby.json, as the docs use it (docs/deployment.md): a second driver on the same host that takes
over the active driver's query."""

from __future__ import annotations

from pathlib import Path

from streaming.config import DEFAULT_CONFIG
from streaming.config_file import load_gateway_config

STANDBY = Path(DEFAULT_CONFIG).parent / "standby.json"


def test_the_standby_config_takes_over_the_same_query_with_ports_of_its_own() -> None:
    active = load_gateway_config(DEFAULT_CONFIG, bootstrap_servers="127.0.0.1:9092")
    standby = load_gateway_config(STANDBY)
    assert standby.bootstrap_servers == active.bootstrap_servers  # --standby refuses an embedded broker
    for shared in ("query_name", "checkpoint_root", "segments_root", "topics_file", "ingress_topic",
                   "response_topic", "dlq_topic", "groups_topic", "shuffle_partitions"):
        assert getattr(standby, shared) == getattr(active, shared), shared
    assert standby.checkpoint_location == active.checkpoint_location  # the driver lock is there
    front_door_ports = {int(c.front_door_address.rsplit(":", 1)[1]) + i for c in (active, standby)
                        for i in range(c.front_door_nodes)}
    assert len(front_door_ports) == active.front_door_nodes + standby.front_door_nodes  # no node's port shared
    assert standby.metrics_address != active.metrics_address
