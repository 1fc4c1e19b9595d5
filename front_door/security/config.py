"""The `front_door_security` block of the gateway's config, in Kafka's broker property names:

    "front_door_security": {
      "listeners": "SASL_SSL://0.0.0.0:9094,PLAINTEXT://127.0.0.1:9093",
      "advertised.listeners": "SASL_SSL://gateway.example.com:9094",
      "ssl.keystore.location": "/etc/gateway/door.pem",
      "ssl.truststore.location": "/etc/gateway/clients-ca.pem",
      "listener.name.sasl_ssl.ssl.client.auth": "requested",
      "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
      "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
      "super.users": "User:admin"
    }

Values may be `${file:PATH}` or `${env:NAME}` as in the `kafka` block. Without `listeners` the door has one
PLAINTEXT listener on `front_door_address`. `ssl.client.auth` applies to SSL listeners only, and its
listener-prefixed form `listener.name.<listener>.ssl.client.auth` to that one listener, SSL or SASL_SSL
(KIP-684; tls.py). Exposure is checked here: a listener bound beyond loopback with neither TLS nor SASL is
refused unless `front_door_allow_unauthenticated` says so.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from front_door.network.broker_configs import CONNECTION_SETTINGS, ConnectionSettings, is_dynamic
from front_door.network.connection_limits import ConnectionLimitError, ConnectionsPerIp
from front_door.network.connection_slots import SLOT_SETTINGS
from front_door.network.principal import KafkaPrincipal
from front_door.security.authorizer import parse_super_users
from front_door.security.listeners import Listener, ListenerError, parse_listeners, parse_protocol_map
from front_door.security.ssl_principal import DEFAULT_RULES, MappingRule, PrincipalMappingError, parse_rules
from front_door.security.tls import BLOCK, CLIENT_AUTH, LISTENER_CLIENT_AUTH, ClientAuth, TlsSettings
from kafka_cluster.security import (
    KafkaSecurityError,
    SaslMechanism,
    Secret,
    SecurityProtocol,
    resolve_setting,
    setting_path,
)

log = logging.getLogger("gateway.front_door.security")

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# Kafka's connection.failed.authentication.delay.ms default
FAILED_AUTHENTICATION_DELAY_MS = 100
DEFAULT_SASL_MECHANISMS = (SaslMechanism.SCRAM_SHA_512, SaslMechanism.SCRAM_SHA_256)
KEYS = ("listeners", "advertised.listeners", "listener.security.protocol.map", "ssl.keystore.location",
        "ssl.key.password", "ssl.truststore.location", "ssl.client.auth", "ssl.principal.mapping.rules",
        "sasl.enabled.mechanisms", "authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found",
        "connection.failed.authentication.delay.ms", "connections.max.reauth.ms", *CONNECTION_SETTINGS)


@dataclass(frozen=True)
class FrontDoorSecurity:
    listeners: tuple[Listener, ...] = ()  # empty: one PLAINTEXT listener on front_door_address
    tls: TlsSettings | None = None
    principal_rules: tuple[MappingRule, ...] = DEFAULT_RULES
    sasl_mechanisms: tuple[SaslMechanism, ...] = DEFAULT_SASL_MECHANISMS
    authorizer: bool = False  # Kafka's ACLs enforced (authorizer.class.name = StandardAuthorizer)
    super_users: frozenset[KafkaPrincipal] = field(default_factory=frozenset)
    allow_everyone_if_no_acl_found: bool = False
    failed_authentication_delay_ms: int = FAILED_AUTHENTICATION_DELAY_MS
    # KIP-368: a SASL session's lifetime, after which a client must have re-authenticated (0: sessions last)
    connections_max_reauth_ms: int = 0
    # the connection caps (max.connections*), as written (by Kafka's names) and parsed; the cluster's dynamic
    # broker configs win over them (broker_configs.py)
    connection_settings: tuple[tuple[str, str], ...] = ()
    connections: ConnectionSettings = field(default_factory=ConnectionSettings)

    @property
    def sasl(self) -> bool:
        return any(listener.protocol.sasl for listener in self.listeners)


def _bool(key: str, text: str) -> bool:
    if text.strip().lower() not in ("true", "false"):
        raise KafkaSecurityError(f"{BLOCK}.{key}: expected true or false, got {text!r}")
    return text.strip().lower() == "true"


def load_front_door_security(block: Mapping[str, Any] | None, base_dir: Path | None = None,
                             environ: Mapping[str, str] | None = None) -> FrontDoorSecurity:
    """Resolve and check the block; KafkaSecurityError naming the setting on any mistake."""
    if not block:
        return FrontDoorSecurity()
    environ = os.environ if environ is None else environ
    unknown = sorted(k for k in block if k not in KEYS and not is_dynamic(k) and not LISTENER_CLIENT_AUTH.fullmatch(k))
    if unknown:
        raise KafkaSecurityError(f"{BLOCK}: unknown setting(s) {', '.join(unknown)}; supported: {', '.join(KEYS)} "
                                 f"and, for one listener, listener.name.<listener>."
                                 f"{{{', '.join((*SLOT_SETTINGS, CLIENT_AUTH))}}}")

    def value(key: str) -> str | None:
        raw = block.get(key)
        if raw is None:
            return None
        if not isinstance(raw, str):
            raise KafkaSecurityError(f"{BLOCK}.{key}: expected a string, got {type(raw).__name__}")
        return resolve_setting(BLOCK, key, raw, base_dir, environ)

    try:
        protocol_map = parse_protocol_map(value("listener.security.protocol.map") or "")
        text = value("listeners")
        listeners = parse_listeners(text, value("advertised.listeners"), protocol_map) if text else ()
    except ListenerError as e:
        raise KafkaSecurityError(f"{BLOCK}.{e}") from None
    tls = None
    per_listener = _listener_client_auth(block, value, listeners)
    if (keystore := value("ssl.keystore.location")) is not None:
        client_auth = _client_auth(CLIENT_AUTH, value(CLIENT_AUTH))
        password = value("ssl.key.password")
        truststore = value("ssl.truststore.location")
        tls = TlsSettings(setting_path(keystore, base_dir), Secret(password) if password else None,
                          setting_path(truststore, base_dir) if truststore else None, client_auth, per_listener)
        tls.server_context()  # a wrong file or password fails here, naming the setting
        for listener in listeners:
            if listener.protocol.tls:
                tls.listener_context(listener)  # and a client certificate asked for without a truststore
        if client_auth is not ClientAuth.NONE and listeners and \
                not any(li.protocol is SecurityProtocol.SSL for li in listeners):
            log.warning("%s.%s=%s asks nothing of this door: it applies to SSL listeners only, as in Kafka "
                        "(KIP-684); for a SASL_SSL listener set listener.name.<listener>.%s", BLOCK, CLIENT_AUTH,
                        client_auth.value, CLIENT_AUTH)
    if tls is None and any(listener.protocol.tls for listener in listeners):
        raise KafkaSecurityError(f"{BLOCK}.ssl.keystore.location: an SSL or SASL_SSL listener needs the door's "
                                 "private key and certificate chain (one PEM file)")
    try:
        rules = parse_rules(value("ssl.principal.mapping.rules") or "DEFAULT")
    except PrincipalMappingError as e:
        raise KafkaSecurityError(f"{BLOCK}.{e}") from None
    mechanisms = DEFAULT_SASL_MECHANISMS
    if (names := value("sasl.enabled.mechanisms")) is not None:
        try:
            mechanisms = tuple(SaslMechanism(n.strip().upper()) for n in names.split(",") if n.strip())
        except ValueError:
            raise KafkaSecurityError(f"{BLOCK}.sasl.enabled.mechanisms: {names!r}; the door offers "
                                     f"{', '.join(m.value for m in SaslMechanism)}") from None
        if not mechanisms:
            raise KafkaSecurityError(f"{BLOCK}.sasl.enabled.mechanisms: at least one mechanism")
    authorizer = value("authorizer.class.name") or ""
    if authorizer not in ("", STANDARD_AUTHORIZER):
        raise KafkaSecurityError(f"{BLOCK}.authorizer.class.name: the door's ACLs follow {STANDARD_AUTHORIZER}; "
                                 f"got {authorizer!r}")
    try:
        super_users = parse_super_users(value("super.users"))
    except ValueError as e:
        raise KafkaSecurityError(f"{BLOCK}.super.users: {e} (separate several with ';')") from None
    delay = value("connection.failed.authentication.delay.ms")
    if delay is not None and (not delay.isdigit()):
        raise KafkaSecurityError(f"{BLOCK}.connection.failed.authentication.delay.ms: a number of ms, got {delay!r}")
    reauth = value("connections.max.reauth.ms")
    if reauth is not None and not reauth.isdigit():
        raise KafkaSecurityError(f"{BLOCK}.connections.max.reauth.ms: a number of ms (0: no re-authentication), "
                                 f"got {reauth!r}")
    connection_settings = {key: text for key in block if is_dynamic(key) and (text := value(key)) is not None}
    try:
        connections = ConnectionSettings.parse(connection_settings, [listener.name for listener in listeners]
                                               or ["PLAINTEXT"])
        ConnectionsPerIp(connections.max_connections_per_ip, dict(connections.max_connections_per_ip_overrides))
    except ConnectionLimitError as e:
        raise KafkaSecurityError(f"{BLOCK}: {e}") from None
    return FrontDoorSecurity(
        connection_settings=tuple(sorted(connection_settings.items())), connections=connections,
        listeners=listeners, tls=tls, principal_rules=rules, sasl_mechanisms=mechanisms,
        authorizer=bool(authorizer), super_users=super_users,
        allow_everyone_if_no_acl_found=_bool("allow.everyone.if.no.acl.found",
                                             value("allow.everyone.if.no.acl.found") or "false"),
        failed_authentication_delay_ms=int(delay) if delay is not None else FAILED_AUTHENTICATION_DELAY_MS,
        connections_max_reauth_ms=int(reauth) if reauth is not None else 0,
    )


def _client_auth(key: str, text: str | None) -> ClientAuth:
    try:
        return ClientAuth((text or "none").strip().lower())
    except ValueError:
        raise KafkaSecurityError(f"{BLOCK}.{key}: one of none, requested, required; got {text!r}") from None


def _listener_client_auth(block: Mapping[str, Any], value: Callable[[str], str | None],
                          listeners: tuple[Listener, ...]) -> tuple[tuple[str, ClientAuth], ...]:
    """`listener.name.<listener>.ssl.client.auth` by the listener's name, each naming a TLS listener of the door."""
    names = {listener.name.lower(): listener for listener in listeners}
    out = []
    for key in block:
        if (match := LISTENER_CLIENT_AUTH.fullmatch(key)) is None:
            continue
        listener = names.get(match.group(1).lower())
        if listener is None:
            raise KafkaSecurityError(f"{BLOCK}.{key}: the door has no listener {match.group(1)!r} (its listeners: "
                                     f"{', '.join(li.name for li in listeners) or 'none configured'})")
        if not listener.protocol.tls:
            raise KafkaSecurityError(f"{BLOCK}.{key}: listener {listener.name} is {listener.protocol.value}, "
                                     "without TLS: no client certificate to ask for")
        out.append((listener.name, _client_auth(key, value(key))))
    return tuple(out)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def exposed_unauthenticated(listeners: tuple[Listener, ...]) -> list[Listener]:
    """The listeners that let anyone beyond this host in: bound beyond loopback with neither TLS nor SASL."""
    return [li for li in listeners if not li.protocol.tls and not li.protocol.sasl and not is_loopback(li.host)]
