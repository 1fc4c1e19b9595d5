"""The TLS side of SSL and SASL_SSL listeners, from PEM files as Kafka's `ssl.keystore.type=PEM` takes them:
`ssl.keystore.location` holds the private key and the certificate chain, `ssl.key.password` opens an
encrypted key, `ssl.truststore.location` holds the CA certificates client certificates must chain to, and
`ssl.client.auth` says whether a client certificate is `required`, `requested` or not asked for (`none`,
Kafka's default). TLS 1.2 and 1.3, as Kafka 4's `ssl.enabled.protocols`."""

from __future__ import annotations

import enum
import ssl
from dataclasses import dataclass
from pathlib import Path

from sinks.kafka_security import KafkaSecurityError, Secret

BLOCK = "front_door_security"


class ClientAuth(enum.Enum):
    NONE = "none"
    REQUESTED = "requested"
    REQUIRED = "required"


@dataclass(frozen=True)
class TlsSettings:
    keystore: Path  # PEM: private key and certificate chain
    key_password: Secret | None = None
    truststore: Path | None = None  # PEM CA certificates for client certificates
    client_auth: ClientAuth = ClientAuth.NONE

    def server_context(self) -> ssl.SSLContext:
        """The listener's SSLContext; KafkaSecurityError naming the setting that is wrong."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.keystore, password=self.key_password.reveal() if self.key_password else None)
        except FileNotFoundError:
            raise KafkaSecurityError(f"{BLOCK}.ssl.keystore.location: file {self.keystore} does not exist") from None
        except (ssl.SSLError, OSError) as e:
            raise KafkaSecurityError(f"{BLOCK}.ssl.keystore.location: {self.keystore} is not a PEM private key with "
                                     f"its certificate chain, or ssl.key.password does not open it ({e})") from None
        if self.client_auth is not ClientAuth.NONE:
            if self.truststore is None:
                raise KafkaSecurityError(f"{BLOCK}.ssl.client.auth={self.client_auth.value} needs "
                                         "ssl.truststore.location (the CA certificates of the clients)")
            try:
                context.load_verify_locations(cafile=self.truststore)
            except FileNotFoundError:
                raise KafkaSecurityError(f"{BLOCK}.ssl.truststore.location: file {self.truststore} does not exist") from None
            except (ssl.SSLError, OSError) as e:
                raise KafkaSecurityError(f"{BLOCK}.ssl.truststore.location: {self.truststore} holds no PEM "
                                         f"certificate ({e})") from None
            context.verify_mode = ssl.CERT_REQUIRED if self.client_auth is ClientAuth.REQUIRED else ssl.CERT_OPTIONAL
        return context
