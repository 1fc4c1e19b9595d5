"""The front door's users: SCRAM credentials as Kafka keeps them (`ScramCredential`: salt, stored key,
server key, iterations; RFC 5802, section 3), never the password, in the security store (kind `scram`, one record
per user and mechanism). Kafka's tools manage them through the door (`kafka-configs.sh --alter
--add-config 'SCRAM-SHA-512=[password=...]' --entity-type users`: AlterUserScramCredentials, which sends the
salted password, never the password), and `gateway users` writes them directly to bootstrap the first one.

SASL/PLAIN is checked against the same credentials: the password is salted with a credential's salt and
iterations and its stored key compared (Kafka's `ScramFormatter`; the password's UTF-8 bytes, as Kafka
takes them).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from collections.abc import Callable
from dataclasses import dataclass

from front_door.cluster.security_store import SCRAM_KIND, SecurityStore
from kafka_cluster.security import SaslMechanism

# Kafka's ScramMechanism: minimum and maximum iterations a credential may have
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
SCRAM_MECHANISMS = (SaslMechanism.SCRAM_SHA_256, SaslMechanism.SCRAM_SHA_512)
# Kafka's ScramMechanism type codes on the wire (AlterUserScramCredentials, DescribeUserScramCredentials)
MECHANISM_TYPES = {SaslMechanism.SCRAM_SHA_256: 1, SaslMechanism.SCRAM_SHA_512: 2}


def hash_name(mechanism: SaslMechanism) -> str:
    if mechanism is SaslMechanism.SCRAM_SHA_256:
        return "sha256"
    if mechanism is SaslMechanism.SCRAM_SHA_512:
        return "sha512"
    raise ValueError(f"{mechanism.value} is not a SCRAM mechanism")


@dataclass(frozen=True)
class ScramCredential:
    mechanism: SaslMechanism
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @staticmethod
    def from_salted_password(mechanism: SaslMechanism, salt: bytes, salted_password: bytes,
                             iterations: int) -> ScramCredential:
        """RFC 5802, section 3: ClientKey = HMAC(SaltedPassword, "Client Key"), StoredKey = H(ClientKey),
        ServerKey = HMAC(SaltedPassword, "Server Key")."""
        h = hash_name(mechanism)
        client_key = hmac.digest(salted_password, b"Client Key", h)
        return ScramCredential(mechanism, salt, hashlib.new(h, client_key).digest(),
                               hmac.digest(salted_password, b"Server Key", h), iterations)

    @staticmethod
    def from_password(mechanism: SaslMechanism, password: str, iterations: int = MIN_ITERATIONS,
                      salt: bytes | None = None) -> ScramCredential:
        salt = os.urandom(32) if salt is None else salt
        return ScramCredential.from_salted_password(mechanism, salt, salted_password(mechanism, password, salt, iterations),
                                                    iterations)

    def verifies(self, password: str) -> bool:
        """True when `password` is this credential's (constant-time comparison of the stored keys)."""
        other = ScramCredential.from_password(self.mechanism, password, self.iterations, self.salt)
        return hmac.compare_digest(other.stored_key, self.stored_key)

    def to_bytes(self) -> bytes:
        b64 = base64.b64encode
        return json.dumps({"mechanism": self.mechanism.value, "salt": b64(self.salt).decode(),
                           "stored_key": b64(self.stored_key).decode(), "server_key": b64(self.server_key).decode(),
                           "iterations": self.iterations}, sort_keys=True).encode()

    @staticmethod
    def from_bytes(data: bytes) -> ScramCredential:
        d = json.loads(data)
        b64 = base64.b64decode
        return ScramCredential(SaslMechanism(d["mechanism"]), b64(d["salt"]), b64(d["stored_key"]),
                               b64(d["server_key"]), int(d["iterations"]))


def salted_password(mechanism: SaslMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(): PBKDF2 with the mechanism's HMAC (the password's UTF-8 bytes, as Kafka's
    `ScramFormatter.normalize`)."""
    return hashlib.pbkdf2_hmac(hash_name(mechanism), password.encode(), salt, iterations)


def _record_name(user: str, mechanism: SaslMechanism) -> str:
    return f"{mechanism.value}/{user}"


class ScramCredentials:
    """The users, as the security store has them now (changes through any door apply as they arrive)."""

    def __init__(self, store: SecurityStore, on_change: Callable[[], None] = lambda: None) -> None:
        self._store = store
        self._by_user: dict[str, dict[SaslMechanism, ScramCredential]] = {}
        for name, value in store.snapshot(SCRAM_KIND).items():
            self._apply(name, value)
        store.subscribe(self._changed)
        self._on_change = on_change

    def _changed(self, kind: str, name: str, value: bytes | None) -> None:
        if kind == SCRAM_KIND:
            self._apply(name, value)
            self._on_change()

    def _apply(self, name: str, value: bytes | None) -> None:
        mechanism_name, _, user = name.partition("/")
        try:
            mechanism = SaslMechanism(mechanism_name)
            credential = None if value is None else ScramCredential.from_bytes(value)
        except (ValueError, KeyError, TypeError):  # a damaged record: that user cannot log in with it
            return
        if credential is None:
            self._by_user.get(user, {}).pop(mechanism, None)
            if not self._by_user.get(user):
                self._by_user.pop(user, None)
        else:
            self._by_user.setdefault(user, {})[mechanism] = credential

    def get(self, user: str, mechanism: SaslMechanism) -> ScramCredential | None:
        return self._by_user.get(user, {}).get(mechanism)

    def users(self) -> dict[str, tuple[ScramCredential, ...]]:
        return {u: tuple(c[m] for m in SCRAM_MECHANISMS if m in c) for u, c in sorted(self._by_user.items())}

    def check_plain(self, user: str, password: str) -> bool:
        """SASL/PLAIN: the password verifies against one of the user's SCRAM credentials."""
        return any(c.verifies(password) for c in self._by_user.get(user, {}).values())

    async def upsert(self, user: str, credential: ScramCredential) -> None:
        await self._store.write(SCRAM_KIND, _record_name(user, credential.mechanism), credential.to_bytes())

    async def delete(self, user: str, mechanism: SaslMechanism) -> None:
        await self._store.write(SCRAM_KIND, _record_name(user, mechanism), None)
