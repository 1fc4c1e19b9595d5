"""The front door's SASL_SSL listener with franz-go, a Kafka client in Go with its own SCRAM and TLS code
(tests/integration/go/scram_client): SCRAM-SHA-512 over TLS, idempotent produce with acks=all to one
partition through the query, and the records fetched back; a wrong password is refused with Kafka's
SASL_AUTHENTICATION_FAILED."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streaming.config import REPO_ROOT, GatewayConfig
from tests.integration.front_door_harness import RunningDoor, running_front_door
from tests.integration.secured_door import (
    ADMIN,
    ADMIN_PASSWORD,
    Certificates,
    add_user,
    make_certificates,
    secured_door_config,
)

pytestmark = pytest.mark.integration

# Built by `make go` (the Makefile's GO_SCRAM_CLIENT), which `make setup` runs
SCRAM_CLIENT = REPO_ROOT / "tests" / "integration" / "go" / "bin" / "scram_client"
RECORDS = 25


@pytest.fixture(scope="session")
def scram_client() -> Path:
    """The franz-go client, built with `make go` when it is missing or older than its source. A machine without
    Go fails here, loudly: `make setup` checks for Go (embedded/prerequisites.py --for test)."""
    if shutil.which("go") is None:
        pytest.fail("Go is not on PATH: the franz-go client (tests/integration/go/scram_client) cannot be built; "
                    "install Go, then `make go`")
    done = subprocess.run(["make", "-s", "go"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"`make go` failed:\n{done.stdout}{done.stderr}"
    assert os.access(SCRAM_CLIENT, os.X_OK), f"`make go` made no {SCRAM_CLIENT}"
    return SCRAM_CLIENT


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


@pytest.fixture
def running(spark, gateway_config: GatewayConfig, certificates: Certificates) -> Iterator[RunningDoor]:  # noqa: ANN001
    with running_front_door(spark, secured_door_config(gateway_config, certificates)) as running:
        plaintext = running.door.listener_addresses["PLAINTEXT"][0]
        add_user({"bootstrap.servers": f"{plaintext.host}:{plaintext.port}"}, ADMIN, ADMIN_PASSWORD)
        yield running


def run_client(client: Path, running: RunningDoor, certificates: Certificates, password: str,
               topic: str = "ct", partition: int = 0) -> tuple[int, dict[str, Any]]:
    """The client's exit status and its JSON; the password through the environment, off the command line."""
    bound = running.door.listener_addresses["SASL_SSL"][0]
    done = subprocess.run(
        [str(client), "-bootstrap", f"{bound.host}:{bound.port}", "-ca", certificates.ca, "-user", ADMIN,
         "-mechanism", "SCRAM-SHA-512", "-topic", topic, "-partition", str(partition), "-count", str(RECORDS),
         "-timeout", "90s"],
        env={**os.environ, "SCRAM_PASSWORD": password}, capture_output=True, text=True, timeout=120)
    lines = done.stdout.strip().splitlines()
    assert lines, f"no output (exit {done.returncode}): {done.stderr}"
    return done.returncode, json.loads(lines[-1])


def test_franz_go_produces_and_fetches_back_over_sasl_ssl_with_scram_sha_512(
        scram_client: Path, running: RunningDoor, certificates: Certificates) -> None:
    status, result = run_client(scram_client, running, certificates, ADMIN_PASSWORD)
    assert status == 0, result.get("error")
    produced, consumed = result["produced"], result["consumed"]
    assert [r["value"] for r in produced] == [f"franz-go-{i}" for i in range(RECORDS)]
    first = produced[0]["offset"]
    assert [r["offset"] for r in produced] == list(range(first, first + RECORDS))  # acked in order, one partition
    assert consumed == produced  # fetched back: the same offsets and values


def test_a_wrong_password_is_refused_with_kafkas_error(scram_client: Path, running: RunningDoor,
                                                       certificates: Certificates) -> None:
    status, result = run_client(scram_client, running, certificates, "not-" + ADMIN_PASSWORD)
    assert status == 1
    assert "SASL_AUTHENTICATION_FAILED" in result["error"], result["error"]
    assert result["produced"] == [] and result["consumed"] == []
