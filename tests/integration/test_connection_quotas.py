"""Per-IP connection creation rate quotas (KIP-612) side by side on Apache Kafka and on the front door: the
same `kafka-configs.sh` commands print the same, and the same burst of connections from one IP is cut at
the same count (a broker's quota window counts as ten samples, so a quota of 1/s lets a burst of 10 through,
then closes connections unanswered). Likewise `max.connections.per.ip.overrides`: an IP's connections past
its maximum are closed unanswered, and a closed one frees a slot, set on both with the same `kafka-configs.sh
--entity-type brokers --entity-default` command. Each flood comes from its own loopback
address, so nothing else of the tests is throttled. And a listener's `max.connections` and
`max.connection.creation.rate` refuse nothing: a connection past them waits, unanswered, for a slot or for its
throttle time, on a broker of its own with those listeners as on the door."""

from __future__ import annotations

import socket
import ssl
import struct
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from embedded.local_kafka import LocalKafka, run_kafka_tool
from streaming.config import GatewayConfig
from tests.integration.fault_harness import _wait_for
from tests.integration.gateway_io import create_gateway_topics
from tests.integration.ports import free_ports
from tests.integration.secured_door import Door, make_certificates, secured_door_config, start_door

FLOODING_IP = "127.0.0.23"  # only this test connects from it
TLS_FLOODING_IP = "127.0.0.24"  # only the TLS test connects from it
LIMITED_IP = "127.0.0.25"  # only the max.connections.per.ip test connects from it
LIMIT = 2
BURST = 30
API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 5) + b"flood"


@pytest.fixture
def door(gateway_config: GatewayConfig) -> Iterator[Door]:
    config = gateway_config.with_overrides(security_topic=f"security-{uuid.uuid4().hex[:8]}")
    create_gateway_topics(config)
    running = start_door(config)
    try:
        yield running
    finally:
        running.door.stop()


def _configs(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_kafka_tool("kafka.admin.ConfigCommand", ["--bootstrap-server", bootstrap, *args])


def _burst(address: tuple[str, int], source: str) -> list[socket.socket]:
    """BURST connections to `address` from `source`, opened at once."""
    socks = []
    for _ in range(BURST):
        s = socket.socket()
        s.settimeout(30)
        s.bind((source, 0))
        s.connect(address)
        socks.append(s)
    return socks


def _answered_of_a_burst(address: tuple[str, int]) -> int:
    """A burst from FLOODING_IP, each connection sending ApiVersions; how many are answered (the others are
    closed without a byte)."""
    socks = _burst(address, FLOODING_IP)
    for s in socks:
        s.sendall(struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0)
    answered = 0
    for s in socks:
        with s:
            try:
                answered += len(s.recv(4)) == 4
            except ConnectionResetError:
                pass
    return answered


def test_an_ip_quota_set_with_kafka_configs_is_described_and_enforced_as_kafka_does(kafka: LocalKafka,
                                                                                      door: Door) -> None:
    host, port = kafka.bootstrap_servers.split(",")[0].rsplit(":", 1)
    targets = {"kafka": (kafka.bootstrap_servers, (host, int(port))),
               "door": (door.bootstrap("PLAINTEXT"), door.address("PLAINTEXT"))}
    printed: dict[str, str] = {}
    answered: dict[str, int] = {}
    for name, (bootstrap, address) in targets.items():
        try:
            added = _configs(bootstrap, "--alter", "--entity-type", "ips", "--entity-name", FLOODING_IP,
                             "--add-config", "connection_creation_rate=1")
            assert added.returncode == 0, added.stdout + added.stderr
            described = _configs(bootstrap, "--describe", "--entity-type", "ips", "--entity-name", FLOODING_IP)
            assert described.returncode == 0, described.stdout + described.stderr
            printed[name] = described.stdout
            answered[name] = _answered_of_a_burst(address)
            refused = _configs(bootstrap, "--alter", "--entity-type", "ips", "--entity-name", FLOODING_IP,
                               "--add-config", "connection_creation_rate=2.5")
            assert refused.returncode != 0 and "connection_creation_rate cannot be a fractional value" in (
                refused.stdout + refused.stderr), refused.stdout + refused.stderr
        finally:
            removed = _configs(bootstrap, "--alter", "--entity-type", "ips", "--entity-name", FLOODING_IP,
                               "--delete-config", "connection_creation_rate")
            assert removed.returncode == 0, removed.stdout + removed.stderr
    assert printed["door"] == printed["kafka"]
    assert f"Quota configs for ip '{FLOODING_IP}' are connection_creation_rate=1.0" in printed["door"]
    assert answered == {"kafka": 10, "door": 10}
    # removed: a burst gets through whole, and the describe lists nothing
    assert _answered_of_a_burst(door.address("PLAINTEXT")) == BURST
    described = _configs(door.bootstrap("PLAINTEXT"), "--describe", "--entity-type", "ips")
    assert described.returncode == 0 and FLOODING_IP not in described.stdout, described.stdout + described.stderr


def _handshakes_of_a_burst(address: tuple[str, int], ca: str) -> int:
    """A burst from TLS_FLOODING_IP; how many of its connections then complete a TLS handshake."""
    context = ssl.create_default_context(cafile=ca)
    socks = _burst(address, TLS_FLOODING_IP)
    completed = 0
    for s in socks:
        try:
            with context.wrap_socket(s, server_hostname="127.0.0.1"):
                completed += 1
        except OSError:  # ssl.SSLError included: closed before the handshake, as a throttled connection is
            s.close()
    return completed


def test_a_throttled_connection_gets_no_tls_handshake(gateway_config: GatewayConfig, tmp_path: Path) -> None:
    """The quota applies before TLS, as in Kafka's Acceptor: a flooding host costs no handshakes past its
    quota's burst."""
    certificates = make_certificates(tmp_path / "certificates")
    config = secured_door_config(gateway_config, certificates)
    create_gateway_topics(config)
    running = start_door(config)
    try:
        added = _configs(running.bootstrap("PLAINTEXT"), "--alter", "--entity-type", "ips", "--entity-name",
                         TLS_FLOODING_IP, "--add-config", "connection_creation_rate=1")
        assert added.returncode == 0, added.stdout + added.stderr
        assert _handshakes_of_a_burst(running.address("SSL"), certificates.ca) == 10
    finally:
        running.door.stop()


def _connect_and_ask(address: tuple[str, int]) -> tuple[socket.socket, bool]:
    """A connection from LIMITED_IP sending ApiVersions; whether it was answered (else closed unanswered)."""
    s = socket.socket()
    s.settimeout(30)
    s.bind((LIMITED_IP, 0))
    s.connect(address)
    try:
        s.sendall(struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0)
        return s, len(s.recv(4)) == 4
    except (ConnectionResetError, BrokenPipeError):
        return s, False


def _limited(address: tuple[str, int]) -> list[bool]:
    """Whether a connection is answered with LIMIT others of its IP held open, and then after one of them
    closed. The server counts a closed connection out when it reads its end: until it has, a connection may be
    refused, so the LIMIT are opened, and the freed slot tried, until answered."""
    held: list[socket.socket] = []

    def answered() -> bool:
        s, ok = _connect_and_ask(address)
        (held.append(s) if ok else s.close())
        return ok

    try:
        _wait_for(lambda: answered() and len(held) == LIMIT, f"{LIMIT} connections answered", 30)
        extra, over = _connect_and_ask(address)
        extra.close()
        held.pop(0).close()
        _wait_for(answered, "a slot freed by a closed connection", 30)
        return [over, True]
    finally:
        for s in held:
            s.close()


def test_max_connections_per_ip_set_with_kafka_configs_closes_what_is_over_and_a_closed_one_frees_a_slot_as_kafka_does(
        kafka: LocalKafka, gateway_config: GatewayConfig) -> None:
    """The same dynamic broker config, `kafka-configs.sh --alter --entity-type brokers --entity-default`, on
    Apache Kafka and through the door: described alike, enforced alike, and removed."""
    host, port = kafka.bootstrap_servers.split(",")[0].rsplit(":", 1)
    setting = f"max.connections.per.ip.overrides={LIMITED_IP}:{LIMIT}"
    config = gateway_config.with_overrides(security_topic=f"security-{uuid.uuid4().hex[:8]}")
    create_gateway_topics(config)
    running = start_door(config)
    targets = {"kafka": (kafka.bootstrap_servers, (host, int(port))),
               "door": (running.bootstrap("PLAINTEXT"), running.address("PLAINTEXT"))}
    results: dict[str, list[bool]] = {}
    described: dict[str, str] = {}
    try:
        for name, (bootstrap, address) in targets.items():
            added = _configs(bootstrap, "--alter", "--entity-type", "brokers", "--entity-default",
                             "--add-config", setting)
            assert added.returncode == 0, added.stdout + added.stderr
            try:
                shown = _configs(bootstrap, "--describe", "--entity-type", "brokers", "--entity-default")
                assert shown.returncode == 0, shown.stdout + shown.stderr
                described[name] = "\n".join(line for line in shown.stdout.splitlines()
                                             if "Default configs" in line or "max.connections" in line)

                def over_the_limit_is_closed(address: tuple[str, int] = address) -> bool:
                    held = [_connect_and_ask(address) for _ in range(LIMIT + 1)]
                    for s, _ in held:
                        s.close()
                    return not held[-1][1]

                _wait_for(over_the_limit_is_closed, f"{name} to apply the dynamic setting", 60)
                results[name] = _limited(address)
            finally:
                removed = _configs(bootstrap, "--alter", "--entity-type", "brokers", "--entity-default",
                                   "--delete-config", "max.connections.per.ip.overrides")
                assert removed.returncode == 0, removed.stdout + removed.stderr
        after = _configs(targets["door"][0], "--describe", "--entity-type", "brokers", "--entity-default")
        rejected = running.door.metrics.connections_rejected.labels("PLAINTEXT")._value.get()
        # removed: the door lets the whole burst of one IP in again
        held = [_connect_and_ask(targets["door"][1]) for _ in range(LIMIT + 1)]
        for s, _ in held:
            s.close()
    finally:
        running.door.stop()
    assert results == {"kafka": [False, True], "door": [False, True]}
    assert described["door"] == described["kafka"]
    assert f"max.connections.per.ip.overrides={LIMITED_IP}:{LIMIT}" in described["door"]
    assert "max.connections.per.ip.overrides" not in after.stdout and all(ok for _, ok in held)
    assert rejected >= 1


SLOTS = 2  # listener.name.limited.max.connections
PACED_BURST = 13  # connections at once on a listener with max.connection.creation.rate=1: 10 pass, 3 wait
NOT_ANSWERED_S = 2.0  # how long a connection waiting for a slot is watched for an answer that must not come
LISTENER_LIMITS = {"listener.name.limited.max.connections": str(SLOTS),
                   "listener.name.paced.max.connection.creation.rate": "1"}


def _ask(address: tuple[str, int]) -> socket.socket:
    s = socket.create_connection(address, timeout=30)
    s.sendall(struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0)
    return s


def _answered(s: socket.socket) -> bool:
    try:
        return len(s.recv(4)) == 4
    except ConnectionResetError:
        return False


def _waits_for_a_slot(address: tuple[str, int]) -> list[bool]:
    """SLOTS connections answered; one more not answered while they are open, and answered once one closes."""
    held = [_ask(address) for _ in range(SLOTS)]
    try:
        answered = [_answered(s) for s in held]
        waiting = _ask(address)
        with waiting:
            waiting.settimeout(NOT_ANSWERED_S)
            try:
                early = _answered(waiting)
            except TimeoutError:
                early = False
            held.pop(0).close()
            waiting.settimeout(30)
            return [*answered, early, _answered(waiting)]
    finally:
        for s in held:
            s.close()


def _paced_burst(address: tuple[str, int]) -> int:
    socks = [_ask(address) for _ in range(PACED_BURST)]
    try:
        return sum(_answered(s) for s in socks)
    finally:
        for s in socks:
            s.close()


def test_a_listeners_max_connections_and_creation_rate_make_connections_wait_and_refuse_none_as_kafka_does(
        gateway_config: GatewayConfig, tmp_path: Path) -> None:
    """The same listener settings on an Apache Kafka broker and on the door: past max.connections a connection
    is not read until another closes; past max.connection.creation.rate (a burst counted over 10 s, as for an
    IP's quota) it is served after its throttle time; neither is closed."""
    base = free_ports(4)
    names = ("PLAINTEXT", "LIMITED", "PACED")
    broker = LocalKafka(tmp_path / "listener-limits-kafka", port=base, controller_port=base + 3, broker_properties={
        "listeners": ",".join(f"{n}://127.0.0.1:{base + i}" for i, n in enumerate(names))
        + f",CONTROLLER://127.0.0.1:{base + 3}",
        "advertised.listeners": ",".join(f"{n}://127.0.0.1:{base + i}" for i, n in enumerate(names)),
        "listener.security.protocol.map": ",".join(f"{n}:PLAINTEXT" for n in (*names, "CONTROLLER")),
        **LISTENER_LIMITS})
    broker.start()
    try:
        kafka = {"slots": _waits_for_a_slot(("127.0.0.1", base + 1)), "paced": _paced_burst(("127.0.0.1", base + 2))}
    finally:
        broker.stop()
    config = gateway_config.with_overrides(security_topic=f"security-{uuid.uuid4().hex[:8]}", front_door_security={
        "listeners": ",".join(f"{n}://127.0.0.1:0" for n in names),
        "listener.security.protocol.map": ",".join(f"{n}:PLAINTEXT" for n in names), **LISTENER_LIMITS})
    create_gateway_topics(config)
    running = start_door(config)
    try:
        door = {"slots": _waits_for_a_slot(running.address("LIMITED")), "paced": _paced_burst(running.address("PACED"))}
        blocked = {name: running.door.metrics.accept_blocked.labels(name)._value.get() for name in names}
    finally:
        running.door.stop()
    assert kafka == door == {"slots": [True, True, False, True], "paced": PACED_BURST}
    assert blocked["LIMITED"] > 0 and blocked["PACED"] > 0 and blocked["PLAINTEXT"] == 0


REFUSED_ALIKE = (("--add-config", "max.connections=-1"), ("--add-config", "max.connections=abc"),
                 ("--add-config", "max.connections.per.ip=0"),
                 ("--add-config", "listener.name.plaintext.max.connections=0"),
                 ("--delete-config", "max.connections"))  # not set: the tool itself refuses, after DescribeConfigs


def _why_refused(result: subprocess.CompletedProcess[str]) -> str | None:
    """The reason kafka-configs printed for a refused change (None: it succeeded)."""
    if result.returncode == 0:
        return None
    lines = (result.stdout + result.stderr).splitlines()
    return next((line.split("Exception: ", 1)[1] for line in lines if "InvalidRequestException: " in line),
                next((line for line in lines if line.startswith("Invalid config(s)")), "\n".join(lines[-3:])))


def test_kafka_configs_changes_to_the_connection_caps_are_refused_and_taken_as_kafka_does(
        kafka: LocalKafka, gateway_config: GatewayConfig) -> None:
    """Each refused change gets Kafka's own reason through the door; an override naming a host that does not
    resolve is taken by both (and left out where it would be enforced)."""
    config = gateway_config.with_overrides(security_topic=f"security-{uuid.uuid4().hex[:8]}")
    create_gateway_topics(config)
    running = start_door(config)
    reasons: dict[str, list[str | None]] = {}
    taken: dict[str, bool] = {}
    try:
        for name, bootstrap in (("kafka", kafka.bootstrap_servers), ("door", running.bootstrap("PLAINTEXT"))):
            def alter(*change: str, bootstrap: str = bootstrap) -> subprocess.CompletedProcess[str]:
                return _configs(bootstrap, "--alter", "--entity-type", "brokers", "--entity-default", *change)

            reasons[name] = [_why_refused(alter(*change)) for change in REFUSED_ALIKE]
            try:
                taken[name] = alter("--add-config", "max.connections.per.ip.overrides=[nohost.invalid:3]").returncode == 0
            finally:
                removed = alter("--delete-config", "max.connections.per.ip.overrides")
                assert removed.returncode == 0, removed.stdout + removed.stderr
        answered = _connect_and_ask(running.address("PLAINTEXT"))  # the door still serves
        answered[0].close()
    finally:
        running.door.stop()
    assert reasons["door"] == reasons["kafka"]
    assert all(reasons["door"]) and "Value must be at least 0" in str(reasons["door"][0])
    assert taken == {"kafka": True, "door": True} and answered[1]
