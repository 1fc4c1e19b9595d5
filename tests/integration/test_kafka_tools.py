"""Kafka's command-line tools under their own names (bin/kafka-*.sh), on the jars `make jars` resolved: each
starts and is Kafka's own (its `--version` is the Kafka of .jvm/). What they do through the front door is the
walk-through's (test_security_walkthrough.py) and the security tests'."""

from __future__ import annotations

import subprocess

import pytest

from streaming.config import REPO_ROOT

pytestmark = pytest.mark.integration

TOOLS = ("kafka-acls.sh", "kafka-configs.sh", "kafka-topics.sh", "kafka-console-producer.sh",
         "kafka-console-consumer.sh", "kafka-consumer-groups.sh", "kafka-transactions.sh")


def _kafka_version() -> str:
    (clients,) = (REPO_ROOT / ".jvm" / "kafka-tools").glob("kafka-clients-*.jar")
    return clients.stem.removeprefix("kafka-clients-")


@pytest.mark.parametrize("tool", TOOLS)
def test_each_tool_starts_and_is_kafkas(tool: str) -> None:
    done = subprocess.run([str(REPO_ROOT / "bin" / tool), "--version"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == _kafka_version(), done.stdout


def test_the_tools_are_all_there() -> None:
    assert sorted(p.name for p in (REPO_ROOT / "bin").glob("kafka-*.sh")) == sorted((*TOOLS, "kafka-run-class.sh"))


def test_without_the_jars_the_tools_say_what_to_run() -> None:
    done = subprocess.run([str(REPO_ROOT / "bin" / "kafka-acls.sh"), "--version"], capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin", "KAFKA_CLASSPATH_DIR": "no-such-jars"})
    assert done.returncode == 1
    assert done.stderr.startswith("error: Apache Kafka's jars are not in ") and "run `make jars`" in done.stderr
