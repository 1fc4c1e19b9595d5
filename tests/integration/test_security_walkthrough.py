"""docs/security.md's walk-through ("A secured front door on one host"), run as the page writes it: the blocks
marked `<!-- walk-through -->`, in order, each in bash from a directory laid out as the repository (this
checkout's bin/ and .venv/, and conf/secured-door.json), and each `<!-- walk-through: output -->` block's
lines found in what the block before it printed. In place of `make run` (the block marked `gateway`) the test
runs the gateway on the project's fixtures: the session's broker as the embedded one (`gateway users` finds it
where its server.properties says it listens, as it finds `make run`'s) and the session's Spark.

What the page cannot know, and only that, is changed: its listeners' ports become free ones (the test runs
beside others), and its config's `var/` paths point into the test's directory (a config's relative paths are
the repository's)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from embedded.local_kafka import LocalKafka
from streaming.config import REPO_ROOT, GatewayConfig
from streaming.config_file import load_gateway_config
from tests.integration.front_door_harness import running_front_door
from tests.integration.ports import free_ports

pytestmark = pytest.mark.integration

PAGE = REPO_ROOT / "docs" / "security.md"
CONFIG = "conf/secured-door.json"
# A marked block: `<!-- walk-through -->` (run it), `<!-- walk-through: gateway -->` (make run),
# `<!-- walk-through: output -->` (what the block before prints), `<!-- walk-through: PATH -->` (a file's content)
MARKED = re.compile(r"^<!-- walk-through(?:: (?P<what>[^>]*?))? -->\n```\w+\n(?P<body>.*?)^```$", re.M | re.S)
PAGE_PORTS = (9193, 9293, 9093)  # node 1's port of each listener of conf/secured-door.json
PORT = re.compile(r":(" + "|".join(map(str, PAGE_PORTS)) + r")\b")


@dataclass(frozen=True)
class Block:
    what: str  # "" (commands), "gateway", "output", or a file of the repository
    body: str


def walkthrough() -> list[Block]:
    return [Block(m["what"] or "", m["body"]) for m in MARKED.finditer(PAGE.read_text())]


def _ports() -> dict[int, int]:
    """A free base port for each of the page's listeners, with room for the config's nodes and apart."""
    nodes = load_gateway_config(REPO_ROOT / "conf" / "gateway.json").front_door_nodes
    chosen: dict[int, int] = {}
    while len(chosen) < len(PAGE_PORTS):
        base = free_ports(nodes)
        if all(abs(base - other) >= nodes for other in chosen.values()):
            chosen[PAGE_PORTS[len(chosen)]] = base
    return chosen


def _clone(directory: Path, gateway_config: GatewayConfig, kafka: LocalKafka, ports: dict[int, int]) -> Path:
    """A directory as the repository's root after `make run`: bin/, .venv/, .jvm/ and the page's config,
    pointed at the test's topics, storage and ports, and at the session's broker as `make run`'s embedded one."""
    directory.mkdir()
    for name in ("bin", ".venv", ".jvm"):
        (directory / name).symlink_to(REPO_ROOT / name)
    shipped = json.loads(_local((REPO_ROOT / CONFIG).read_text(), ports))
    block = {key: value.replace("var/", f"{directory}/var/", 1) if value.startswith("var/") else value
             for key, value in shipped.pop("front_door_security").items()}
    isolated = {f.name: getattr(gateway_config, f.name) for f in dataclasses.fields(GatewayConfig)
                if f.name in ("ingress_topic", "ingress_partitions", "response_topic", "dlq_topic", "groups_topic",
                              "topics_file", "segments_root", "checkpoint_root", "query_name", "spark_master",
                              "shuffle_partitions", "ui_enabled")}
    config = {**shipped, **isolated, "bootstrap_servers": None, "local_broker_dir": str(kafka.work_dir),
              "security_topic": f"{gateway_config.ingress_topic}.security", "front_door_security": block}
    (directory / "conf").mkdir()
    (directory / CONFIG).write_text(json.dumps(config, indent=2))
    return directory


def _local(text: str, ports: dict[int, int]) -> str:
    """`text` with the page's listener ports replaced by the test's."""
    return PORT.sub(lambda m: f":{ports[int(m[1])]}", text)


def test_the_page_runs_its_gateway_on_the_shipped_config() -> None:
    blocks = walkthrough()
    (gateway,) = [b for b in blocks if b.what == "gateway"]
    assert gateway.body.strip() == f"make run CONFIG={CONFIG}"
    (config,) = [b for b in blocks if b.what == CONFIG]
    assert json.loads(config.body) == json.loads((REPO_ROOT / CONFIG).read_text())
    assert sum(1 for b in blocks if b.what == "") >= 5 and blocks[0].what == ""


def test_the_walkthrough_works_as_written(spark, kafka: LocalKafka, gateway_config: GatewayConfig,  # noqa: ANN001
                                          tmp_path: Path) -> None:
    ports = _ports()
    clone = _clone(tmp_path / "clone", gateway_config, kafka, ports)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}  # .venv/bin/gateway runs this checkout's code
    printed = ""
    with contextlib.ExitStack() as gateway:
        for block in walkthrough():
            if block.what == "gateway":  # make run CONFIG=conf/secured-door.json, on the fixtures
                config = load_gateway_config(clone / CONFIG).with_overrides(bootstrap_servers=kafka.bootstrap_servers)
                gateway.enter_context(running_front_door(spark, config))
            elif block.what == "output":
                missing = [line for line in block.body.splitlines() if line.strip() and line not in printed]
                assert missing == [], printed
            elif block.what == "":
                done = subprocess.run(["bash", "-euo", "pipefail", "-c", _local(block.body, ports)], cwd=clone,
                                      env=env, capture_output=True, text=True, timeout=300)
                assert done.returncode == 0, f"{block.body}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
                printed = done.stdout + done.stderr
