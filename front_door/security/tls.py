"""The TLS side of SSL and SASL_SSL listeners, from PEM files as Kafka's `ssl.keystore.type=PEM` takes them:
`ssl.keystore.location` holds the private key and the certificate chain, `ssl.key.password` opens an
encrypted key, `ssl.truststore.location` holds the CA certificates client certificates must chain to, and
`ssl.client.auth` says whether a client certificate is `required`, `requested` or not asked for (`none`,
Kafka's default). TLS 1.2 and 1.3, as Kafka 4's `ssl.enabled.protocols`.

Which listeners ask for a client certificate is Kafka's rule (KIP-684): `ssl.client.auth` applies to SSL
listeners only; `listener.name.<listener>.ssl.client.auth` (the listener's name in lower case) sets it for one
listener, SSL or SASL_SSL. A SASL_SSL listener without it asks for none, and one that asks still takes its
principal from SASL: the certificate only has to chain to the truststore."""

from __future__ import annotations

import enum
import re
import ssl
from dataclasses import dataclass
from pathlib import Path

from front_door.security.listeners import Listener
from kafka_cluster.security import KafkaSecurityError, Secret, SecurityProtocol

BLOCK = "front_door_security"
CLIENT_AUTH = "ssl.client.auth"
# Kafka's listener-prefixed form (ListenerName.configPrefix: the name in lower case)
LISTENER_CLIENT_AUTH = re.compile(r"listener\.name\.([^.]+)\.ssl\.client\.auth")


class ClientAuth(enum.Enum):
    NONE = "none"
    REQUESTED = "requested"
    REQUIRED = "required"


def listener_client_auth_key(listener: str) -> str:
    return f"listener.name.{listener.lower()}.{CLIENT_AUTH}"


@dataclass(frozen=True)
class TlsSettings:
    keystore: Path  # PEM: private key and certificate chain
    key_password: Secret | None = None
    truststore: Path | None = None  # PEM CA certificates for client certificates
    client_auth: ClientAuth = ClientAuth.NONE  # `ssl.client.auth`: SSL listeners only (KIP-684)
    # `listener.name.<listener>.ssl.client.auth`, by the listener's name as configured
    listener_client_auth: tuple[tuple[str, ClientAuth], ...] = ()

    def client_auth_of(self, listener: Listener) -> tuple[ClientAuth, str]:
        """Whether `listener` asks for a client certificate, and the setting that says so (KIP-684)."""
        for name, auth in self.listener_client_auth:
            if name == listener.name:
                return auth, listener_client_auth_key(name)
        if listener.protocol is SecurityProtocol.SSL:
            return self.client_auth, CLIENT_AUTH
        return ClientAuth.NONE, listener_client_auth_key(listener.name)

    def listener_context(self, listener: Listener) -> ssl.SSLContext:
        """The SSLContext of one TLS listener; KafkaSecurityError naming the setting that is wrong."""
        return self.server_context(*self.client_auth_of(listener))

    def server_context(self, client_auth: ClientAuth = ClientAuth.NONE, setting: str = CLIENT_AUTH) -> ssl.SSLContext:
        """An SSLContext with the door's certificate that asks for client certificates as `client_auth` says
        (`setting` named when the truststore it needs is missing); KafkaSecurityError naming what is wrong."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.keystore, password=self.key_password.reveal() if self.key_password else None)
        except FileNotFoundError:
            raise KafkaSecurityError(f"{BLOCK}.ssl.keystore.location: file {self.keystore} does not exist") from None
        except (ssl.SSLError, OSError) as e:
            raise KafkaSecurityError(f"{BLOCK}.ssl.keystore.location: {self.keystore} is not a PEM private key with "
                                     f"its certificate chain, or ssl.key.password does not open it ({e})") from None
        if client_auth is not ClientAuth.NONE:
            if self.truststore is None:
                raise KafkaSecurityError(f"{BLOCK}.{setting}={client_auth.value} needs "
                                         "ssl.truststore.location (the CA certificates of the clients)")
            try:
                context.load_verify_locations(cafile=self.truststore)
            except FileNotFoundError:
                raise KafkaSecurityError(f"{BLOCK}.ssl.truststore.location: file {self.truststore} does not exist") from None
            except (ssl.SSLError, OSError) as e:
                raise KafkaSecurityError(f"{BLOCK}.ssl.truststore.location: {self.truststore} holds no PEM "
                                         f"certificate ({e})") from None
            context.verify_mode = ssl.CERT_REQUIRED if client_auth is ClientAuth.REQUIRED else ssl.CERT_OPTIONAL
        return context
