"""A real Apache Kafka broker secured as a company's Kafka is: TLS from a CA the test makes, SASL
(SCRAM-SHA-512/256, PLAIN), client certificates, and ACLs enforced by `StandardAuthorizer`.

    with SecuredKafka(tmp_path) as kafka:
        kafka.create_topics([("orders", 1, {})])
        kafka.grant("User:gateway", [(ResourceType.TOPIC, "orders", AclOperation.READ)])
        consumer = Consumer({**kafka.sasl_client("gateway"), "group.id": "g"})

It is `embedded.local_kafka.LocalKafka` (Kafka's own `kafka.Kafka`, one KRaft node) with these listeners:

- `SASL_SSL` (`bootstrap_servers`): SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN over TLS;
- `SSL` (`ssl_bootstrap_servers`): TLS with client certificates required (mTLS); a certificate whose
  subject is `CN=gateway` is the principal `User:CN=gateway` (Kafka's default principal builder with
  `ssl.principal.mapping.rules=DEFAULT` takes the whole subject DN);
- `CONTROLLER` (KRaft): SASL_SSL with PLAIN, where the broker half of the node logs in to its controller
  half as `admin`.

Users (passwords made per instance, in `passwords`): `admin` (the only super user), `gateway` (SCRAM both
ways and PLAIN, same password, no ACLs until a test grants them), `nobody` (SCRAM-SHA-512, no ACLs ever).

Files under the work dir, beside the broker's own: `ca.pem` (the CA every client trusts), `server.pem`
(the broker's PKCS#8 key and certificate chain, for 127.0.0.1 and localhost), `gateway.pem` /
`gateway.key` (the client certificate CN=gateway and its key), `other-ca.pem` (an unrelated CA, for
"wrong trust" tests).
"""

from __future__ import annotations

import datetime
import os
import secrets
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType

import trustme
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from embedded.local_kafka import LocalKafka, free_port
from kafka_cluster.admin import TopicSpec

ADMIN, GATEWAY, NOBODY = "admin", "gateway", "nobody"
MTLS_PRINCIPAL = "User:CN=gateway"
# (resource type, resource name, operation): one ALLOW entry for any host
Acl = tuple[ResourceType, str, AclOperation]

START_TIMEOUT_S = 300.0  # TLS + SASL + the authorizer on a slow 2-core machine that also runs Spark
_POLL_S = 0.05  # between metadata / ACL look-ups while waiting for the broker to apply a change

_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


class SecuredKafka:
    """One secured Apache Kafka broker+controller on 127.0.0.1, with its state under `work_dir`."""

    def __init__(self, work_dir: str | os.PathLike[str], *, start_timeout: float = START_TIMEOUT_S) -> None:
        self.work_dir = Path(work_dir).resolve()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.passwords = {user: secrets.token_urlsafe(18) for user in (ADMIN, GATEWAY, NOBODY)}
        self.sasl_port, self.ssl_port, self.controller_port = free_port(), free_port(), free_port()
        self._write_pem_files()
        self.broker = LocalKafka(
            self.work_dir,
            port=self.sasl_port,
            controller_port=self.controller_port,
            broker_properties=self._broker_properties(),
            format_args=self._scram_users(),
            client_config=self._sasl_settings(ADMIN, "SCRAM-SHA-512", self.passwords[ADMIN]),
            start_timeout=start_timeout,
        )

    # ---- addresses, files, client configs

    @property
    def bootstrap_servers(self) -> str:
        """The SASL_SSL listener."""
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def ssl_bootstrap_servers(self) -> str:
        """The SSL listener (client certificate required)."""
        return f"127.0.0.1:{self.ssl_port}"

    @property
    def ca_pem(self) -> Path:
        return self.work_dir / "ca.pem"

    @property
    def other_ca_pem(self) -> Path:
        return self.work_dir / "other-ca.pem"

    @property
    def server_pem(self) -> Path:
        return self.work_dir / "server.pem"

    @property
    def client_cert_pem(self) -> Path:
        return self.work_dir / "gateway.pem"

    @property
    def client_key_pem(self) -> Path:
        return self.work_dir / "gateway.key"

    def sasl_client(
        self, user: str, mechanism: str = "SCRAM-SHA-512", *, password: str | None = None
    ) -> dict[str, str]:
        """librdkafka settings for `user` on the SASL_SSL listener (`password`: a wrong one, for tests)."""
        settings = self._sasl_settings(user, mechanism, self.passwords[user] if password is None else password)
        return {"bootstrap.servers": self.bootstrap_servers, **settings}

    def mtls_client(self) -> dict[str, str]:
        """librdkafka settings for the SSL listener with the `CN=gateway` client certificate."""
        return {
            "bootstrap.servers": self.ssl_bootstrap_servers,
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.ca_pem),
            "ssl.certificate.location": str(self.client_cert_pem),
            "ssl.key.location": str(self.client_key_pem),
        }

    def admin_client(self) -> AdminClient:
        """An AdminClient as the super user `admin`."""
        return AdminClient(self.sasl_client(ADMIN))

    def _sasl_settings(self, user: str, mechanism: str, password: str) -> dict[str, str]:
        # The keys of the gateway's `kafka` block (kafka_cluster/security.py); librdkafka takes
        # `sasl.mechanism` as an alias of `sasl.mechanisms`.
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
            "ssl.ca.location": str(self.ca_pem),
        }

    # ---- ACLs and topics (as admin)

    def grant(
        self,
        principal: str,
        acls: Iterable[Acl],
        *,
        pattern_type: ResourcePatternType = ResourcePatternType.LITERAL,
        timeout: float = 60.0,
    ) -> None:
        """Create ALLOW ACLs for `principal` and wait until the broker's authorizer applies them."""
        bindings = _bindings(principal, acls, pattern_type)
        admin = self.admin_client()
        for future in admin.create_acls(bindings).values():
            future.result(timeout=timeout)
        self._await_acls(admin, bindings, present=True, deadline=time.monotonic() + timeout)

    def revoke(
        self,
        principal: str,
        acls: Iterable[Acl],
        *,
        pattern_type: ResourcePatternType = ResourcePatternType.LITERAL,
        timeout: float = 60.0,
    ) -> None:
        """Delete what `grant` with the same arguments created, and wait until the authorizer drops it."""
        bindings = _bindings(principal, acls, pattern_type)
        admin = self.admin_client()
        for future in admin.delete_acls([_as_filter(b) for b in bindings]).values():
            future.result(timeout=timeout)
        self._await_acls(admin, bindings, present=False, deadline=time.monotonic() + timeout)

    @staticmethod
    def _await_acls(admin: AdminClient, bindings: Sequence[AclBinding], *, present: bool, deadline: float) -> None:
        # CreateAcls/DeleteAcls are answered once the controller has committed the change to the metadata
        # log (KIP-801); the broker's own authorizer applies it when it replays that record, a moment later.
        # DescribeAcls is answered from the broker's authorizer, so it shows when the change is in force.
        pending = list(bindings)
        while pending:
            pending = [b for b in pending if (b in admin.describe_acls(_as_filter(b)).result(timeout=30)) != present]
            if pending and time.monotonic() >= deadline:
                raise TimeoutError(f"ACLs not {'applied' if present else 'removed'} in time: {pending}")
            if pending:
                time.sleep(_POLL_S)  # the poll interval: the condition itself is checked above

    def create_topics(self, specs: Iterable[TopicSpec], timeout: float = 60.0) -> None:
        """The project's `kafka_cluster.admin.create_topics` as admin: an existing topic is kept, and it
        returns once every partition has a leader."""
        self.broker.create_topics(specs, timeout)

    # ---- lifecycle (LocalKafka's)

    def start(self) -> SecuredKafka:
        self.broker.start()
        return self

    def stop(self) -> None:
        self.broker.stop()

    def is_running(self) -> bool:
        return self.broker.is_running()

    @property
    def log_path(self) -> Path:
        return self.broker.log_path

    @property
    def stdout_path(self) -> Path:
        return self.broker.stdout_path

    @property
    def startup_seconds(self) -> float | None:
        return self.broker.startup_seconds

    def log_tail(self, lines: int = 60) -> str:
        return self.broker.log_tail(lines)

    def __enter__(self) -> SecuredKafka:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"SecuredKafka(SASL_SSL {self.bootstrap_servers}, SSL {self.ssl_bootstrap_servers}, {self.broker!r})"

    # ---- the broker's configuration

    def _scram_users(self) -> list[str]:
        """`kafka-storage format --add-scram` arguments (KIP-900): SCRAM users exist before the broker
        starts, which the broker's own SCRAM login as admin (inter-broker) needs."""
        users = [(ADMIN, "SCRAM-SHA-512"), (GATEWAY, "SCRAM-SHA-512"), (GATEWAY, "SCRAM-SHA-256"),
                 (NOBODY, "SCRAM-SHA-512")]
        args: list[str] = []
        for user, mechanism in users:
            args += ["--add-scram", f"{mechanism}=[name={user},password={self.passwords[user]}]"]
        return args

    def _broker_properties(self) -> dict[str, str]:
        admin_password = self.passwords[ADMIN]
        return {
            "listeners": f"SASL_SSL://127.0.0.1:{self.sasl_port},SSL://127.0.0.1:{self.ssl_port},"
            f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"SASL_SSL://127.0.0.1:{self.sasl_port},SSL://127.0.0.1:{self.ssl_port}",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:SASL_SSL",
            # TLS from PEM files (KIP-651): one file with the PKCS#8 key and the chain; the CA to trust.
            # Every listener serves this certificate; the broker's own connections trust ca.pem.
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.server_pem),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_pem),
            "listener.name.ssl.ssl.client.auth": "required",
            # SASL_SSL: SCRAM users live in the metadata log (format --add-scram); PLAIN users in the
            # listener's JAAS line (user_<name>="<password>"). The broker's inter-broker client logs in
            # here as admin with SCRAM-SHA-512 (the username/password of that mechanism's JAAS line).
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                f'{_SCRAM} required username="{ADMIN}" password="{admin_password}";',
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": f"{_SCRAM} required;",
            "listener.name.sasl_ssl.plain.sasl.jaas.config":
                f'{_PLAIN} required user_{GATEWAY}="{self.passwords[GATEWAY]}";',
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            # The KRaft controller listener cannot use SCRAM: SCRAM credentials are metadata records the
            # controller serves, not ones it can check logins against (KAFKA-15513). PLAIN with a
            # JAAS-defined admin instead, over TLS; the broker half of this node is the client
            # (sasl.mechanism.controller.protocol, the username/password of the same JAAS line).
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config":
                f'{_PLAIN} required username="{ADMIN}" password="{admin_password}" '
                f'user_{ADMIN}="{admin_password}";',
            "sasl.mechanism.controller.protocol": "PLAIN",
            # ACLs (KIP-801's StandardAuthorizer, in the metadata log). Only admin is super: it is the
            # setup principal and the one the broker presents to its controller and to itself.
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": f"User:{ADMIN}",
        }

    def _write_pem_files(self) -> None:
        ca = trustme.CA()
        server = ca.issue_cert("127.0.0.1", "localhost")
        # Kafka's PEM keystore reads PKCS#8 keys only ("BEGIN PRIVATE KEY"); trustme writes the
        # traditional OpenSSL form, so re-encode. Chain: the leaf first, then the CA (KIP-651).
        key = serialization.load_pem_private_key(server.private_key_pem.bytes(), password=None)
        pkcs8 = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        self.server_pem.write_bytes(pkcs8 + b"".join(blob.bytes() for blob in server.cert_chain_pems))
        ca.cert_pem.write_to_path(str(self.ca_pem))
        trustme.CA().cert_pem.write_to_path(str(self.other_ca_pem))
        cert, client_key = _client_certificate(ca, "gateway")
        self.client_cert_pem.write_bytes(cert)
        self.client_key_pem.write_bytes(client_key)


def _client_certificate(ca: trustme.CA, common_name: str) -> tuple[bytes, bytes]:
    """A client certificate whose subject is exactly `CN=<common_name>`, signed by `ca`, and its key.

    trustme's own certificates also carry O and OU, which Kafka's default principal (the whole DN) would
    include; a subject of one CN makes the principal `User:CN=<common_name>`."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    ca_key = serialization.load_pem_private_key(ca.private_key_pem.bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def _bindings(principal: str, acls: Iterable[Acl], pattern_type: ResourcePatternType) -> list[AclBinding]:
    return [
        AclBinding(restype, name, pattern_type, principal, "*", operation, AclPermissionType.ALLOW)
        for restype, name, operation in acls
    ]


def _as_filter(binding: AclBinding) -> AclBindingFilter:
    return AclBindingFilter(
        binding.restype,
        binding.name,
        binding.resource_pattern_type,
        binding.principal,
        binding.host,
        binding.operation,
        binding.permission_type,
    )
