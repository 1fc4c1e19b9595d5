"""A front door with every kind of listener, for the tests of its TLS, SASL and users: certificates from
`trustme` (a CA, the door's certificate for 127.0.0.1, client certificates), and Kafka's wire spoken directly
with kio's schemas where a test needs bytes no client library sends (a request before authentication, a
SASL exchange cut off)."""

from __future__ import annotations

import io
import socket
import struct
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trustme
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from front_door.metrics import FrontDoorMetrics
from front_door.server import FrontDoor
from sinks.registry_watcher import RegistryWatcher
from streaming.config import GatewayConfig

ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
# Listener names in the order `secured_door_config` gives them; each on free ports of loopback
LISTENERS = ("SASL_SSL", "SSL", "SASL_PLAINTEXT", "PLAINTEXT")


@dataclass(frozen=True)
class Certificates:
    directory: Path

    @property
    def ca(self) -> str:
        return str(self.directory / "ca.pem")

    @property
    def door(self) -> str:
        return str(self.directory / "door.pem")

    def client(self, name: str) -> tuple[str, str]:
        """(certificate, key) PEM paths of a client certificate whose subject is `CN=<name>`."""
        return str(self.directory / f"{name}.pem"), str(self.directory / f"{name}.key")


def make_certificates(directory: Path, clients: tuple[str, ...] = ("writer",)) -> Certificates:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(directory / "door.pem"))
    for name in clients:
        cert = ca.issue_cert(f"{name}@example.com", common_name=name)
        cert.cert_chain_pems[0].write_to_path(str(directory / f"{name}.pem"))
        cert.private_key_pem.write_to_path(str(directory / f"{name}.key"))
    return Certificates(directory)


def secured_door_config(config: GatewayConfig, certificates: Certificates, **settings: str) -> GatewayConfig:
    """`config` with a front door on all four listeners (client certificates required on SSL) and a security
    topic of its own."""
    block = {
        "listeners": ",".join(f"{name}://127.0.0.1:0" for name in LISTENERS),
        "ssl.keystore.location": certificates.door, "ssl.truststore.location": certificates.ca,
        "ssl.client.auth": "requested", "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
        **settings,
    }
    return config.with_overrides(front_door_security=block, security_topic=f"security-{uuid.uuid4().hex[:8]}")


def client_settings(listener: str, certificates: Certificates, bootstrap: str, *, user: str | None = None,
                    password: str | None = None, mechanism: str = "SCRAM-SHA-512",
                    certificate: str | None = None) -> dict[str, Any]:
    """librdkafka settings for one listener of the door."""
    settings: dict[str, Any] = {"bootstrap.servers": bootstrap, "security.protocol": listener}
    if "SSL" in listener:
        settings["ssl.ca.location"] = certificates.ca
    if certificate is not None:
        cert, key = certificates.client(certificate)
        settings |= {"ssl.certificate.location": cert, "ssl.key.location": key}
    if listener.startswith("SASL"):
        settings |= {"sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password}
    return settings


def add_user(bootstrap_settings: dict[str, Any], user: str, password: str,
             mechanism: ScramMechanism = ScramMechanism.SCRAM_SHA_512, iterations: int = 8192) -> None:
    """AlterUserScramCredentials through the door (librdkafka's admin client salts the password)."""
    admin = AdminClient(bootstrap_settings)
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, iterations), password.encode())])
    for future in futures.values():
        future.result(timeout=30)


class WireConnection:
    """One plaintext connection speaking Kafka's framing with kio's schemas."""

    def __init__(self, address: tuple[str, int], timeout_s: float = 30.0) -> None:
        self.sock = socket.create_connection(address, timeout=timeout_s)
        self.correlation_id = 0

    def send(self, api_key: int, version: int, body: Any) -> int:
        schema = load_request_schema(api_key, version)
        self.correlation_id += 1
        buffer = io.BytesIO()
        header = schema.__header_schema__
        entity_writer(header)(buffer, header(request_api_key=api_key, request_api_version=version,
                                             correlation_id=self.correlation_id, client_id="wire"))
        entity_writer(schema)(buffer, body)
        self.sock.sendall(struct.pack(">i", buffer.tell()) + buffer.getvalue())
        return self.correlation_id

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def receive_frame(self) -> bytes | None:
        """The next frame's bytes, or None when the door closed the connection."""
        head = self._exactly(4)
        if head is None:
            return None
        return self._exactly(struct.unpack(">i", head)[0])

    def receive(self, api_key: int, version: int) -> Any | None:
        frame = self.receive_frame()
        if frame is None:
            return None
        schema = load_response_schema(api_key, version)
        header, used = entity_reader(schema.__header_schema__)(frame, 0)
        assert header.correlation_id == self.correlation_id
        return entity_reader(schema)(frame, used)[0]

    def closes(self) -> bool:
        """True when the door closes the connection (whatever it sent before) within the socket's timeout."""
        try:
            while self.sock.recv(4096):
                pass
        except TimeoutError:
            return False
        return True

    def _exactly(self, size: int) -> bytes | None:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Door:
    """A front door without a query (what authentication needs), its config and its listeners' addresses."""

    config: GatewayConfig
    door: FrontDoor

    def address(self, listener: str) -> tuple[str, int]:
        bound = self.door.listener_addresses[listener][0]
        return bound.host, bound.port

    def bootstrap(self, listener: str) -> str:
        host, port = self.address(listener)
        return f"{host}:{port}"


def start_door(config: GatewayConfig) -> Door:
    registry = RegistryWatcher(config.path(config.topics_file))
    door = FrontDoor(config.front_door_settings(), registry.current, FrontDoorMetrics())
    door.start()
    return Door(config, door)


def request_body(api_key: int, version: int, **values: Any) -> Any:
    return load_request_schema(api_key, version)(**values)
