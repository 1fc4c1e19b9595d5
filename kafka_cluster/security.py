"""How the gateway authenticates to its Kafka cluster: the `kafka` block of the config, in the property
names Kafka's clients use, translated here and only here for each client the gateway runs (docs/security.md):

- librdkafka (confluent-kafka: the sink's publishers, the front door's bridge and groups store, the admin
  client, `gateway dlq`, `gateway status`, the demo);
- Kafka's Java client inside Spark's Kafka source (`kafka.`-prefixed options) and Kafka's own tools
  (`--command-config` properties).

    "kafka": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
              "sasl.username": "gateway", "sasl.password": "${file:/run/secrets/gateway}",
              "ssl.ca.location": "/etc/gateway/ca.pem"}

Secrets (`sasl.password`, `ssl.key.password`) and any other value may be `${file:PATH}` (the file's
content, without its final newline) or `${env:NAME}`, Kafka's config-provider notation. PEM files are read
once where the config is loaded and handed to every client as content (librdkafka's `ssl.*.pem`, Kafka's
KIP-651 `ssl.truststore.certificates` / `ssl.keystore.key`), so executors need no copy of them on disk.
Loaded secrets are `Secret`s, shown as `[hidden]` (Kafka's `Password`) wherever they are printed.
"""

from __future__ import annotations

import enum
import json
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contract.repository import REPO_ROOT

# Kafka's config-provider notation, `${provider:path}`, for the providers the gateway resolves itself.
_VARIABLE = re.compile(r"^\$\{(file|env):([^}]+)\}$")


class KafkaSecurityError(ValueError):
    """The `kafka` block is wrong; the message names the setting and what to fix."""


class Secret:
    """A password or private key: its value for the clients (`reveal`), `[hidden]` everywhere else."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "[hidden]"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self) -> tuple[Any, ...]:  # executors get the value (pickled with the task), not a string
        return (Secret, (self._value,))


class SecurityProtocol(enum.Enum):
    """Kafka's `security.protocol`."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


class SaslMechanism(enum.Enum):
    """Kafka's `sasl.mechanism`, with the Java client's JAAS login module for each."""

    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"

    @property
    def login_module(self) -> str:
        if self is SaslMechanism.PLAIN:
            return "org.apache.kafka.common.security.plain.PlainLoginModule"
        return "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class KafkaSecurity:
    """The resolved `kafka` block: what every client of the gateway presents to its Kafka cluster."""

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    mechanism: SaslMechanism | None = None
    username: str | None = None
    password: Secret | None = None
    ca_pem: str | None = None  # trusted CA certificates (None: the system's trust store)
    certificate_pem: str | None = None  # the client certificate (chain) for mTLS
    key_pem: Secret | None = None  # its private key (PKCS#8 PEM)
    key_password: Secret | None = None  # when the key is encrypted
    verify_hostname: bool = True  # ssl.endpoint.identification.algorithm=https (both clients' default)

    def librdkafka(self) -> dict[str, str]:
        """confluent-kafka / librdkafka properties (besides bootstrap.servers)."""
        props = {"security.protocol": self.protocol.value}
        if self.protocol.sasl:
            assert self.mechanism is not None and self.username is not None and self.password is not None
            props |= {"sasl.mechanisms": self.mechanism.value, "sasl.username": self.username,
                      "sasl.password": self.password.reveal()}
        if self.protocol.tls:
            props["ssl.endpoint.identification.algorithm"] = "https" if self.verify_hostname else "none"
            if self.ca_pem is not None:
                props["ssl.ca.pem"] = self.ca_pem
            if self.certificate_pem is not None and self.key_pem is not None:
                props |= {"ssl.certificate.pem": self.certificate_pem, "ssl.key.pem": self.key_pem.reveal()}
                if self.key_password is not None:
                    props["ssl.key.password"] = self.key_password.reveal()
        return props

    def java(self) -> dict[str, str]:
        """Kafka Java client properties (besides bootstrap.servers): the JAAS line built from the username and
        password, PEM content inline (KIP-651), so no file needs to exist where the client runs."""
        props = {"security.protocol": self.protocol.value}
        if self.protocol.sasl:
            assert self.mechanism is not None and self.username is not None and self.password is not None
            props |= {"sasl.mechanism": self.mechanism.value,
                      "sasl.jaas.config": f"{self.mechanism.login_module} required "
                                          f"username={_jaas_quote(self.username)} "
                                          f"password={_jaas_quote(self.password.reveal())};"}
        if self.protocol.tls:
            props["ssl.endpoint.identification.algorithm"] = "https" if self.verify_hostname else ""
            if self.ca_pem is not None:
                props |= {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": self.ca_pem}
            if self.certificate_pem is not None and self.key_pem is not None:
                props |= {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": self.certificate_pem,
                          "ssl.keystore.key": self.key_pem.reveal()}
                if self.key_password is not None:
                    props["ssl.key.password"] = self.key_password.reveal()
        return props

    def spark_options(self) -> dict[str, str]:
        """Spark's Kafka source and sink options: the Java properties with Spark's `kafka.` prefix."""
        return {f"kafka.{key}": value for key, value in self.java().items()}

    def command_config(self) -> str:
        """A Java properties file for Kafka's tools (`kafka-acls.sh --command-config FILE`)."""
        return "".join(f"{key}={_properties_escape(value)}\n" for key, value in self.java().items())

    def describe(self) -> str:
        """One line for logs and status: the protocol, mechanism and principal, never a secret."""
        parts = [self.protocol.value]
        if self.protocol.sasl:
            parts.append(f"{self.mechanism.value if self.mechanism else '?'} as {self.username}")
        if self.protocol.tls and self.certificate_pem is not None:
            parts.append("client certificate")
        return ", ".join(parts)


PLAINTEXT = KafkaSecurity()

# Spark option keys whose values are secret: the plan, the UI and the event log redact them
# (spark.sql.redaction.options.regex; Spark's default covers only `url`).
SPARK_SECRET_OPTIONS = r"(?i)url|sasl\.jaas\.config|ssl\.keystore\.key|ssl\.key\.password|password"


# The gateway's consumer group ids begin with it, so one prefixed ACL covers them (docs/security.md).
DEFAULT_GROUP_PREFIX = "gateway-"


@dataclass(frozen=True)
class KafkaCluster:
    """A Kafka cluster as the gateway reaches it: where, with what credentials, and the prefix of its group ids
    (librdkafka's consumers look up their group even when they only assign partitions, so an authorizer checks
    READ on it)."""

    bootstrap_servers: str
    security: KafkaSecurity = PLAINTEXT
    group_prefix: str = DEFAULT_GROUP_PREFIX

    def group_id(self, purpose: str, unique: bool = True) -> str:
        """A consumer group id of the gateway's (`unique`: a throw-away one per client; nothing is committed)."""
        return f"{self.group_prefix}{purpose}" + (f"-{uuid.uuid4().hex[:12]}" if unique else "")

    def client(self, settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """librdkafka properties for a producer, consumer or admin client: these `settings` plus the
        cluster's address and security (which win: nothing connects around them)."""
        return {**(settings or {}), "bootstrap.servers": self.bootstrap_servers, **self.security.librdkafka()}

    def spark_options(self) -> dict[str, str]:
        return {"kafka.bootstrap.servers": self.bootstrap_servers, **self.security.spark_options()}

    def __str__(self) -> str:
        return self.bootstrap_servers


# The keys of the `kafka` block: librdkafka's names, which Kafka users write for every non-Java client.
_KEYS = ("security.protocol", "sasl.mechanism", "sasl.username", "sasl.password", "ssl.ca.location",
         "ssl.certificate.location", "ssl.key.location", "ssl.key.password", "ssl.endpoint.identification.algorithm")
_SECRET_KEYS = ("sasl.password", "ssl.key.password")


def load_kafka_security(block: Mapping[str, Any] | None, base_dir: Path | None = None,
                        environ: Mapping[str, str] | None = None) -> KafkaSecurity:
    """Resolve and check the `kafka` block. Relative file paths are relative to `base_dir`. Every mistake
    raises `KafkaSecurityError` naming the setting: an unknown key or mechanism, a missing file or variable,
    a SASL protocol without credentials, a certificate without its key."""
    if not block:
        return PLAINTEXT
    environ = os.environ if environ is None else environ
    unknown = sorted(set(block) - set(_KEYS))
    if unknown:
        raise KafkaSecurityError(f"kafka: unknown setting(s) {', '.join(unknown)}; supported: {', '.join(_KEYS)}")

    def value(key: str) -> str | None:
        raw = block.get(key)
        if raw is None:
            return None
        if not isinstance(raw, str):
            raise KafkaSecurityError(f"kafka.{key}: expected a string, got {type(raw).__name__}")
        return _resolve(key, raw, base_dir, environ)

    def pem(key: str) -> str | None:
        location = value(key)
        if location is None:
            return None
        path = _path(location, base_dir)
        text = _read(key, path)
        if "-----BEGIN " not in text:
            raise KafkaSecurityError(f"kafka.{key}: {path} is not a PEM file (no '-----BEGIN' line)")
        return text

    protocol_name = (value("security.protocol") or "PLAINTEXT").upper()
    try:
        protocol = SecurityProtocol(protocol_name)
    except ValueError:
        raise KafkaSecurityError(f"kafka.security.protocol: unknown protocol {protocol_name!r}; one of "
                                 f"{', '.join(p.value for p in SecurityProtocol)}") from None
    mechanism = username = password = None
    if protocol.sasl:
        mechanism_name = (value("sasl.mechanism") or "").upper()
        if not mechanism_name:
            raise KafkaSecurityError(f"kafka.sasl.mechanism: {protocol.value} needs a mechanism; one of "
                                     f"{', '.join(m.value for m in SaslMechanism)}")
        try:
            mechanism = SaslMechanism(mechanism_name)
        except ValueError:
            raise KafkaSecurityError(f"kafka.sasl.mechanism: unsupported mechanism {mechanism_name!r}; one of "
                                     f"{', '.join(m.value for m in SaslMechanism)}") from None
        username, secret = value("sasl.username"), value("sasl.password")
        for key, given in (("sasl.username", username), ("sasl.password", secret)):
            if not given:
                raise KafkaSecurityError(f"kafka.{key}: {protocol.value} with {mechanism.value} needs it")
        password = Secret(secret or "")
    else:
        for key in ("sasl.mechanism", "sasl.username", "sasl.password"):
            if key in block:
                raise KafkaSecurityError(f"kafka.{key}: set, but security.protocol {protocol.value} uses no SASL; "
                                         "use SASL_SSL or SASL_PLAINTEXT")
    ca = certificate = key = key_password = None
    verify = True
    if protocol.tls:
        ca, certificate = pem("ssl.ca.location"), pem("ssl.certificate.location")
        key_text = pem("ssl.key.location")
        if (certificate is None) != (key_text is None):
            raise KafkaSecurityError("kafka.ssl.certificate.location and kafka.ssl.key.location: a client "
                                     "certificate needs its key, and a key its certificate")
        key = Secret(key_text) if key_text is not None else None
        key_secret = value("ssl.key.password")
        key_password = Secret(key_secret) if key_secret else None
        algorithm = (value("ssl.endpoint.identification.algorithm") or "https").lower()
        if algorithm not in ("https", "none", ""):
            raise KafkaSecurityError(f"kafka.ssl.endpoint.identification.algorithm: {algorithm!r}; "
                                     "'https' (verify the broker's host name) or 'none'")
        verify = algorithm == "https"
    else:
        for key_name in ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password"):
            if key_name in block:
                raise KafkaSecurityError(f"kafka.{key_name}: set, but security.protocol {protocol.value} uses no "
                                         "TLS; use SSL or SASL_SSL")
    return KafkaSecurity(protocol, mechanism, username, password, ca, certificate, key, key_password, verify)


def load_cluster_file(path: Path, bootstrap_servers: str | None = None) -> KafkaCluster:
    """The cluster of a gateway config file (`bootstrap_servers`, the `kafka` block and `consumer_group_prefix`;
    relative paths are relative to the repository root, as in `streaming.config`), for the commands that take
    `--config` without running the gateway. `bootstrap_servers` overrides the file's."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as e:
        raise KafkaSecurityError(f"cannot read {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise KafkaSecurityError(f"{path} is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise KafkaSecurityError(f"{path}: expected a JSON object of settings")
    bootstrap = bootstrap_servers or doc.get("bootstrap_servers") or f"127.0.0.1:{doc.get('local_broker_port', 9092)}"
    return KafkaCluster(bootstrap, load_kafka_security(doc.get("kafka"), REPO_ROOT),
                        doc.get("consumer_group_prefix", DEFAULT_GROUP_PREFIX))


def literal_secrets(block: Mapping[str, Any] | None) -> list[str]:
    """The secret settings written into the config itself rather than `${file:…}` / `${env:…}`."""
    return [k for k in _SECRET_KEYS if isinstance((block or {}).get(k), str) and not _VARIABLE.match(block[k])]


def _resolve(key: str, raw: str, base_dir: Path | None, environ: Mapping[str, str], block: str = "kafka") -> str:
    match = _VARIABLE.match(raw.strip())
    if match is None:
        return raw
    provider, where = match.groups()
    if provider == "env":
        if where not in environ:
            raise KafkaSecurityError(f"{block}.{key}: environment variable {where} is not set")
        return environ[where]
    return _read(key, _path(where, base_dir), block).rstrip("\r\n")


def resolve_setting(block: str, key: str, raw: str, base_dir: Path | None,
                    environ: Mapping[str, str] | None = None) -> str:
    """A setting's value with Kafka's `${file:PATH}` / `${env:NAME}` resolved (relative paths from
    `base_dir`); KafkaSecurityError naming `block.key` when the file or variable is missing."""
    return _resolve(key, raw, base_dir, os.environ if environ is None else environ, block)


def setting_path(location: str, base_dir: Path | None) -> Path:
    """A file setting's path (relative ones from `base_dir`)."""
    return _path(location, base_dir)


def _path(location: str, base_dir: Path | None) -> Path:
    p = Path(location)
    return p if p.is_absolute() or base_dir is None else base_dir / p


def _read(key: str, path: Path, block: str = "kafka") -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise KafkaSecurityError(f"{block}.{key}: file {path} does not exist") from None
    except OSError as e:
        raise KafkaSecurityError(f"{block}.{key}: cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise KafkaSecurityError(f"{block}.{key}: {path} is not text (a PEM file or a secret is; DER is not "
                                 "supported: convert it with `openssl x509 -inform der -out cert.pem`)") from None


def _jaas_quote(text: str) -> str:
    """A JAAS option value in double quotes (Kafka's JaasConfig tokenizer takes backslash escapes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _properties_escape(text: str) -> str:
    """A value for a Java .properties line (java.util.Properties.load)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")

