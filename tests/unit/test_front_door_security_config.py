"""The front door's security settings in Kafka's broker property names: listeners, TLS files, principal
mapping rules, mechanisms, super users, exposure."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path

import pytest
import trustme

from front_door.network.connection_slots import SlotLimits
from front_door.network.principal import user
from front_door.security.config import (
    STANDARD_AUTHORIZER,
    exposed_unauthenticated,
    load_front_door_security,
)
from front_door.security.listeners import (
    ListenerError,
    parse_listeners,
    parse_protocol_map,
    plaintext_listener,
)
from front_door.security.ssl_principal import PrincipalMappingError, parse_rules, principal_name
from front_door.security.tls import ClientAuth
from kafka_cluster.security import KafkaSecurityError, SaslMechanism, SecurityProtocol
from streaming.config import GatewayConfig


def test_listeners_in_kafkas_notation_with_advertised_addresses_and_a_protocol_map() -> None:
    listeners = parse_listeners("SASL_SSL://0.0.0.0:9094, INTERNAL://:9095,PLAINTEXT://[::1]:9093",
                                "SASL_SSL://gw.example.com:19094", parse_protocol_map("INTERNAL:SASL_PLAINTEXT"))
    assert [(li.name, li.protocol, li.host, li.port) for li in listeners] == [
        ("SASL_SSL", SecurityProtocol.SASL_SSL, "0.0.0.0", 9094),
        ("INTERNAL", SecurityProtocol.SASL_PLAINTEXT, "0.0.0.0", 9095),
        ("PLAINTEXT", SecurityProtocol.PLAINTEXT, "::1", 9093)]
    assert (listeners[0].advertised_host, listeners[0].advertised_port) == ("gw.example.com", 19094)
    assert listeners[1].advertised_host is None
    assert plaintext_listener("127.0.0.1:0", None).protocol is SecurityProtocol.PLAINTEXT


@pytest.mark.parametrize("listeners,advertised,match", [
    ("SASL_SSL:9094", None, "is not NAME://host:port"),
    ("PLAINTEXT://:1,PLAINTEXT://:2", None, "appear once"),
    ("INTERNAL://:9000", None, "has no security protocol"),
    ("PLAINTEXT://:9093", "SSL://x:1", "not in listeners"),
    ("PLAINTEXT://:70000", None, "above 65535"),
])
def test_listener_mistakes_name_the_setting(listeners: str, advertised: str | None, match: str) -> None:
    with pytest.raises(ListenerError, match=match):
        parse_listeners(listeners, advertised)


def test_principal_mapping_rules_as_kafkas_ssl_principal_mapper() -> None:
    rules = parse_rules("RULE:^CN=(.*?),OU=(.*?),O=.*$/$1@$2/L, RULE:^CN=([^,]*)$/$1/U, DEFAULT")
    assert principal_name("CN=Writer,OU=Apps,O=Example", rules) == "writer@apps"
    assert principal_name("CN=ops", rules) == "OPS"
    assert principal_name("O=Example,C=DE", rules) == "O=Example,C=DE"  # DEFAULT: the DN itself
    with pytest.raises(PrincipalMappingError, match="No rules apply"):
        principal_name("O=x", parse_rules("RULE:^CN=(.*)$/$1/"))
    with pytest.raises(PrincipalMappingError, match="cannot parse"):
        parse_rules("RULES:nope")


def test_the_block_resolves_files_and_checks_every_setting(tmp_path: Path) -> None:
    ca = trustme.CA()
    keystore = tmp_path / "door.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(keystore))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    security = load_front_door_security({
        "listeners": "SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.keystore.location": "door.pem",
        "ssl.truststore.location": "${env:CA}", "ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "plain, SCRAM-SHA-256", "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:admin;User:CN=ops,O=Example", "allow.everyone.if.no.acl.found": "true",
        "connection.failed.authentication.delay.ms": "250", "max.connections.per.ip": "0",
        "connections.max.reauth.ms": "3600000",
        "max.connections.per.ip.overrides": "10.0.0.1:5, localhost:2",
    }, tmp_path, {"CA": str(tmp_path / "ca.pem")})
    assert security.sasl and security.authorizer and security.allow_everyone_if_no_acl_found
    assert security.sasl_mechanisms == (SaslMechanism.PLAIN, SaslMechanism.SCRAM_SHA_256)
    assert security.super_users == {user("admin"), user("CN=ops,O=Example")}
    assert security.failed_authentication_delay_ms == 250
    assert security.connections.max_connections_per_ip == 0
    assert security.connections_max_reauth_ms == 3_600_000
    assert security.connections.max_connections_per_ip_overrides == (("10.0.0.1", 5), ("localhost", 2))
    assert security.tls is not None and security.tls.server_context() is not None


@pytest.mark.parametrize("block,match", [
    ({"listeners": "SSL://:0"}, "needs the door's private key"),
    ({"ssl.keystore.location": "/nonexistent.pem"}, "does not exist"),
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "the door offers"),
    ({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}, "StandardAuthorizer"),
    ({"super.users": "admin"}, "super.users"),
    ({"allow.everyone.if.no.acl.found": "yes"}, "true or false"),
    ({"connection.failed.authentication.delay.ms": "soon"}, "a number of ms"),
    ({"max.connections.per.ip": "many"}, "Invalid value many for configuration max.connections.per.ip: Not a number"),
    ({"connections.max.reauth.ms": "-1"}, "0: no re-authentication"),
    ({"max.connections.per.ip": "0"}, "can be set to zero only if max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": "10.0.0.1"}, "is not host:count"),
    ({"max.connections.per.ip.overrides": "no-such-host.invalid:5"}, "contains invalid addresses"),
    ({"ssl.client.auth": "required"}, None),  # without a keystore: TLS settings are not read
    ({"sasl.password": "x"}, "unknown setting"),
    ({"max.connections": "-1"}, "Invalid value -1 for configuration max.connections: Value must be at least 0"),
    ({"max.connection.creation.rate": "1.5"}, "max.connection.creation.rate: Not a number of type INT"),
    ({"listener.name.external.max.connections": "5"}, "the door has no listener 'external'"),
    ({"listener.name.plaintext.max.connection.rate": "5"}, "unknown setting"),
])
def test_a_wrong_setting_is_named(block: dict[str, str], match: str | None) -> None:
    if match is None:
        load_front_door_security(block)
        return
    with pytest.raises(KafkaSecurityError, match=match):
        load_front_door_security(block)


@pytest.fixture
def door_files(tmp_path: Path) -> Path:
    """door.pem (key and chain) and ca.pem in `tmp_path`."""
    ca = trustme.CA()
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "door.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    return tmp_path


def _client_auth(block: dict[str, str], directory: Path) -> dict[str, tuple[ClientAuth, ssl.VerifyMode]]:
    """Each TLS listener's client authentication, as set and as its SSLContext asks it."""
    security = load_front_door_security({"ssl.keystore.location": "door.pem", **block}, directory)
    assert security.tls is not None
    return {li.name: (security.tls.client_auth_of(li)[0], security.tls.listener_context(li).verify_mode)
            for li in security.listeners}


def test_ssl_client_auth_applies_to_ssl_listeners_and_the_listener_prefix_to_one_listener(door_files: Path) -> None:
    """KIP-684: the broker-wide setting leaves SASL_SSL listeners alone; `listener.name.<l>.ssl.client.auth`
    asks a SASL_SSL listener for certificates and overrides the broker-wide one on an SSL listener."""
    listeners = "SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0,INTERNAL://127.0.0.1:0"
    common = {"listeners": listeners, "listener.security.protocol.map": "INTERNAL:SSL,SASL_SSL:SASL_SSL,SSL:SSL",
              "ssl.truststore.location": "ca.pem"}
    assert _client_auth({**common, "ssl.client.auth": "required"}, door_files) == {
        "SASL_SSL": (ClientAuth.NONE, ssl.CERT_NONE), "SSL": (ClientAuth.REQUIRED, ssl.CERT_REQUIRED),
        "INTERNAL": (ClientAuth.REQUIRED, ssl.CERT_REQUIRED)}
    assert _client_auth({**common, "ssl.client.auth": "required", "listener.name.sasl_ssl.ssl.client.auth": "Requested",
                         "listener.name.internal.ssl.client.auth": "none"}, door_files) == {
        "SASL_SSL": (ClientAuth.REQUESTED, ssl.CERT_OPTIONAL), "SSL": (ClientAuth.REQUIRED, ssl.CERT_REQUIRED),
        "INTERNAL": (ClientAuth.NONE, ssl.CERT_NONE)}


@pytest.mark.parametrize("block,match", [
    ({"listener.name.plaintext.ssl.client.auth": "required"}, "listener PLAINTEXT is PLAINTEXT, without TLS"),
    ({"listener.name.external.ssl.client.auth": "required"}, "the door has no listener 'external'"),
    ({"listener.name.sasl_ssl.ssl.client.auth": "always"}, "listener.name.sasl_ssl.ssl.client.auth: one of none"),
    ({"listener.name.sasl_ssl.ssl.client.auth": "required", "ssl.truststore.location": None},
     r"listener.name.sasl_ssl.ssl.client.auth=required needs ssl.truststore.location"),
])
def test_a_wrong_listener_client_auth_is_named(door_files: Path, block: dict[str, str | None], match: str) -> None:
    settings = {"listeners": "SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0", "ssl.keystore.location": "door.pem",
                "ssl.truststore.location": "ca.pem", **block}
    with pytest.raises(KafkaSecurityError, match=match):
        load_front_door_security({k: v for k, v in settings.items() if v is not None}, door_files)


def test_ssl_client_auth_without_an_ssl_listener_is_said_to_ask_nothing(door_files: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        _client_auth({"listeners": "SASL_SSL://127.0.0.1:0", "ssl.truststore.location": "ca.pem",
                      "ssl.client.auth": "required"}, door_files)
    assert "applies to SSL listeners only" in caplog.text and "listener.name.<listener>.ssl.client.auth" in caplog.text


def test_connection_slots_for_the_door_and_per_listener_in_kafkas_names() -> None:
    security = load_front_door_security({
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "max.connections": "100", "max.connection.creation.rate": "0",
        "listener.name.internal.max.connections": "3", "listener.name.plaintext.max.connection.creation.rate": "7"})
    assert security.connections.slots == SlotLimits(100, 0, {"INTERNAL": 3}, {"PLAINTEXT": 7})
    assert dict(security.connection_settings)["max.connections"] == "100"  # as written, for DescribeConfigs
    # without listeners: the one PLAINTEXT listener on front_door_address
    assert load_front_door_security({"listener.name.plaintext.max.connections": "2"}).connections.slots == \
        SlotLimits(listener_max_connections={"PLAINTEXT": 2})
    assert not load_front_door_security({"max.connections.per.ip": "5"}).connections.slots.limited


def test_a_listener_beyond_loopback_needs_tls_or_sasl() -> None:
    exposed = parse_listeners("PLAINTEXT://0.0.0.0:9093,SASL_PLAINTEXT://0.0.0.0:9094,LOCAL://127.0.0.1:9095",
                              protocol_map={"LOCAL": "PLAINTEXT"})
    assert [str(li) for li in exposed_unauthenticated(exposed)] == ["PLAINTEXT://0.0.0.0:9093"]
    assert GatewayConfig(front_door_address="0.0.0.0:9093").exposed_listeners() == ["PLAINTEXT://0.0.0.0:9093"]
    assert GatewayConfig().exposed_listeners() == []  # make run: loopback
