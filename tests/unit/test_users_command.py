"""`gateway users` (streaming/users_command.py): its arguments, its one-line errors and exit codes, and what it
writes, against an in-memory security store (the real topic: tests/integration/test_users_command.py)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path

import pytest

from embedded.local_kafka import free_port
from front_door.cluster.security_store import SCRAM_KIND
from front_door.security.scram_credentials import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramCredentials,
)
from kafka_cluster.security import SaslMechanism
from streaming import users_command
from streaming.__main__ import build_parser, main
from streaming.users_command import DEFAULT_ITERATIONS
from tests.memory_security_store import MemorySecurityStore


class LoadedStore(MemorySecurityStore):
    """The in-memory store with the Kafka store's life cycle (load, start, close)."""

    def __init__(self) -> None:
        super().__init__()
        self.started = self.closed = False

    def load(self) -> None:
        pass

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.started = True

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps({"bootstrap_servers": "127.0.0.1:9092", "security_topic": "door.security"}))
    return path


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "password"
    path.write_text("s3cret-ü\n")
    return path


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> LoadedStore:
    """The command's store and cluster replaced: `_access` says the topic exists, and records whether it was
    asked to create it."""
    memory = LoadedStore()
    memory.created = []  # type: ignore[attr-defined]

    def access(config: object, timeout_s: float, create: bool) -> bool:
        memory.created.append(create)  # type: ignore[attr-defined]
        return True

    monkeypatch.setattr(users_command, "_access", access)
    monkeypatch.setattr(users_command, "KafkaSecurityStore", lambda cluster, topic, timeout_ms: memory)
    return memory


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# ------------------------------------------------------------------------------------------ arguments


@pytest.mark.parametrize(("argv", "message"), [
    (["--mechanism", "SCRAM-SHA-1"], "error: --mechanism: unknown mechanism 'SCRAM-SHA-1'; one of SCRAM-SHA-256, "
                                     "SCRAM-SHA-512"),
    (["--mechanism", "PLAIN"], "error: --mechanism: PLAIN has no credentials of its own"),
    (["--mechanism", "SCRAM-SHA-512", "--iterations", str(MIN_ITERATIONS - 1)],
     f"error: --iterations: {MIN_ITERATIONS - 1} is outside Kafka's {MIN_ITERATIONS}..{MAX_ITERATIONS}"),
    (["--mechanism", "SCRAM-SHA-512", "--iterations", str(MAX_ITERATIONS + 1)],
     f"error: --iterations: {MAX_ITERATIONS + 1} is outside Kafka's"),
    (["--mechanism", "SCRAM-SHA-512", "--timeout", "0"],
     "error: gateway users add: argument --timeout: expected a positive number of seconds, got '0'"),
])
def test_bad_arguments_are_one_line_and_status_2_before_the_cluster_is_reached(
        argv: list[str], message: str, password_file: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    unreachable = tmp_path / "unreachable.json"  # a cluster that would cost the whole timeout
    unreachable.write_text(json.dumps({"bootstrap_servers": f"127.0.0.1:{free_port()}"}))
    started = time.monotonic()
    try:
        code = main(["users", "add", "alice", *argv, "--password-file", str(password_file), "--config",
                     str(unreachable)])
    except SystemExit as e:  # argparse's refusal of an option's value
        code = e.code
    assert code == 2 and time.monotonic() - started < 5
    assert _error(capsys).startswith(message)


def test_a_missing_password_file_or_variable_or_an_empty_password(tmp_path: Path, config_file: Path,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    add = ["users", "add", "alice", "--mechanism", "SCRAM-SHA-512", "--config", str(config_file)]
    assert main([*add, "--password-file", str(tmp_path / "missing")]) == 2
    assert _error(capsys) == f"error: --password-file: file {tmp_path / 'missing'} does not exist"
    monkeypatch.delenv("DOOR_ADMIN_PASSWORD", raising=False)
    assert main([*add, "--password-env", "DOOR_ADMIN_PASSWORD"]) == 2
    assert _error(capsys) == "error: --password-env: environment variable DOOR_ADMIN_PASSWORD is not set"
    empty = tmp_path / "empty"
    empty.write_text("\n")
    assert main([*add, "--password-file", str(empty)]) == 2
    assert _error(capsys) == f"error: the password in file {empty} is empty"


def test_the_password_is_never_an_argument_and_comes_from_exactly_one_place(password_file: Path) -> None:
    parser = build_parser()
    add = ["users", "add", "alice", "--mechanism", "SCRAM-SHA-512"]
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args([*add, "--password", "s3cret"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit):
        parser.parse_args(add)  # no password at all
    with pytest.raises(SystemExit):
        parser.parse_args([*add, "--password-file", str(password_file), "--password-env", "X"])
    args = parser.parse_args([*add, "--password-file", str(password_file)])
    assert args.iterations == DEFAULT_ITERATIONS and args.config.name == "gateway.json"


def test_delete_needs_a_mechanism(config_file: Path) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["users", "delete", "alice", "--yes", "--config", str(config_file)])


def test_without_bootstrap_servers_the_embedded_broker_of_make_run_is_the_cluster(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Where `make run` started its broker (its server.properties), else local_broker_port; while nothing
    answers there, one line saying to run the command beside `make run`."""
    port = free_port()
    embedded = tmp_path / "embedded.json"
    embedded.write_text(json.dumps({"local_broker_dir": str(tmp_path / "kafka"), "local_broker_port": port}))
    assert main(["users", "list", "--config", str(embedded)]) == 2
    assert _error(capsys) == (f"error: {embedded} has no bootstrap_servers, and no embedded broker answers on "
                              f"127.0.0.1:{port}: the users of `make run`'s door live on the broker it starts, so "
                              f"run this while `make run CONFIG={embedded}` runs (or name the gateway's cluster "
                              "with --bootstrap-servers)")
    with socket.socket() as broker:  # a broker started on another port: it listens where its properties say
        broker.bind(("127.0.0.1", 0))
        broker.listen()
        started = f"127.0.0.1:{broker.getsockname()[1]}"
        (tmp_path / "kafka").mkdir()
        (tmp_path / "kafka" / "server.properties").write_text(
            f"listeners=PLAINTEXT://{started},CONTROLLER://127.0.0.1:1\nadvertised.listeners=PLAINTEXT://{started}\n")
        assert users_command._config(embedded).bootstrap_servers == started
    assert users_command._config(embedded, "kafka-1.example.com:9093").bootstrap_servers == "kafka-1.example.com:9093"


def test_an_unreadable_config_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"bootstrap_servers": "127.0.0.1:9092", "kafka": {"sasl.mechanism": "GSSAPI"}}))
    assert main(["users", "list", "--config", str(wrong)]) == 2
    assert _error(capsys) == (f"error: {wrong}: kafka.sasl.mechanism: set, but security.protocol PLAINTEXT uses no "
                              "SASL; use SASL_SSL or SASL_PLAINTEXT")


def test_an_unreachable_cluster_is_one_line_after_the_timeout(tmp_path: Path, password_file: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"bootstrap_servers": f"127.0.0.1:{free_port()}"}))
    started = time.monotonic()
    code = main(["users", "add", "alice", "--mechanism", "SCRAM-SHA-512", "--password-file", str(password_file),
                 "--config", str(config), "--timeout", "1"])
    assert code == 2 and time.monotonic() - started < 15
    assert _error(capsys).startswith("error: no answer from the Kafka cluster at 127.0.0.1:")


# ------------------------------------------------------------------------------------------ what it writes


def test_add_stores_a_salted_credential_that_verifies_the_files_password(
        store: LoadedStore, config_file: Path, password_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["users", "add", "alice", "--mechanism", "SCRAM-SHA-256", "--iterations", "4096",
                 "--password-file", str(password_file), "--config", str(config_file)]) == 0
    assert capsys.readouterr().out.strip() == ("user alice: added its SCRAM-SHA-256 credential (4096 iterations) on "
                                               "door.security")
    assert store.created == [True] and store.started and store.closed
    (value,) = store.snapshot(SCRAM_KIND).values()
    credential = ScramCredential.from_bytes(value)
    assert credential.mechanism is SaslMechanism.SCRAM_SHA_256 and credential.iterations == 4096
    assert credential.verifies("s3cret-ü") and not credential.verifies("s3cret-ü\n")  # the file's newline is not in it
    assert b"s3cret" not in value


def test_add_again_replaces_and_a_variable_gives_the_password(store: LoadedStore, config_file: Path,
                                                              capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOOR_ADMIN_PASSWORD", "first")
    add = ["users", "add", "admin", "--mechanism", "SCRAM-SHA-512", "--password-env", "DOOR_ADMIN_PASSWORD",
           "--config", str(config_file)]
    assert main(add) == 0
    monkeypatch.setenv("DOOR_ADMIN_PASSWORD", "second")
    assert main(add) == 0
    assert "replaced its SCRAM-SHA-512 credential (8192 iterations)" in capsys.readouterr().out.splitlines()[-1]
    credential = ScramCredentials(store).get("admin", SaslMechanism.SCRAM_SHA_512)
    assert credential is not None and credential.verifies("second") and not credential.verifies("first")


def test_list_shows_users_mechanisms_and_iterations_never_salts_or_keys(store: LoadedStore, config_file: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    credentials = ScramCredentials(store)
    for user, mechanism, iterations in (("bob", SaslMechanism.SCRAM_SHA_512, 4096),
                                        ("alice", SaslMechanism.SCRAM_SHA_512, 8192),
                                        ("alice", SaslMechanism.SCRAM_SHA_256, 16384)):
        asyncio.run(credentials.upsert(user, ScramCredential.from_password(mechanism, "pw", iterations, b"salt")))
    assert main(["users", "list", "--config", str(config_file)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == ["USER   MECHANISM      ITERATIONS",
                                "alice  SCRAM-SHA-256       16384",
                                "alice  SCRAM-SHA-512        8192",
                                "bob    SCRAM-SHA-512        4096"]
    assert main(["users", "list", "--json", "--config", str(config_file)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0] == {"user": "alice", "mechanism": "SCRAM-SHA-256", "iterations": 16384} and len(rows) == 3
    assert store.created == [False, False]  # listing creates no topic


def test_delete_needs_yes_and_an_existing_credential(store: LoadedStore, config_file: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(ScramCredentials(store).upsert("alice", ScramCredential.from_password(SaslMechanism.SCRAM_SHA_512,
                                                                                       "pw")))
    delete = ["users", "delete", "alice", "--config", str(config_file)]
    assert main([*delete, "--mechanism", "SCRAM-SHA-256", "--yes"]) == 1
    assert _error(capsys) == "error: user alice has no SCRAM-SHA-256 credential on door.security"
    assert main([*delete, "--mechanism", "SCRAM-SHA-512"]) == 2
    assert _error(capsys) == "error: deleting user alice's SCRAM-SHA-512 credential: add --yes to do it"
    assert ScramCredentials(store).get("alice", SaslMechanism.SCRAM_SHA_512) is not None
    assert main([*delete, "--mechanism", "SCRAM-SHA-512", "--yes"]) == 0
    assert capsys.readouterr().out.strip() == "user alice: deleted its SCRAM-SHA-512 credential on door.security"
    assert store.snapshot(SCRAM_KIND) == {}
    assert main([*delete, "--mechanism", "SCRAM-SHA-512", "--yes"]) == 1


def test_a_write_the_cluster_does_not_acknowledge_is_status_2(store: LoadedStore, config_file: Path,
                                                              password_file: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    store.fail = True
    assert main(["users", "add", "alice", "--mechanism", "SCRAM-SHA-512", "--password-file", str(password_file),
                 "--config", str(config_file)]) == 2
    assert _error(capsys) == ("error: storing alice's SCRAM-SHA-512 credential: the security topic is unreachable")
    assert store.closed
