"""One connection's SASL exchange, as Kafka's `SaslServerAuthenticator` runs it on a SASL listener:

- before authentication only ApiVersions, SaslHandshake and then SaslAuthenticate are read; any other
  request closes the connection ("Unexpected Kafka request of type ... during SASL handshake");
- SaslHandshake names a mechanism: one of `sasl.enabled.mechanisms`, or UNSUPPORTED_SASL_MECHANISM with the
  enabled ones and the connection closes. Version 0 is followed by the mechanism's tokens as bare
  size-prefixed frames (no request header); version 1 by SaslAuthenticate requests (KIP-152);
- PLAIN (RFC 4616, `PlainSaslServer`) and SCRAM-SHA-256/512 (RFC 5802, `ScramSaslServer`, with `scramp`)
  check against the users' SCRAM credentials (`scram_credentials.py`);
- a failed exchange answers SASL_AUTHENTICATION_FAILED with Kafka's message, after
  `connection.failed.authentication.delay.ms`, and closes the connection (`sasl_exchange.py` waits and closes);
- with `connections.max.reauth.ms` (KIP-368) an authenticated connection runs a new exchange (`reauthenticating`)
  with the mechanism it used before (`previous`); `sasl_exchange.py` checks the principal stays the same.
"""

from __future__ import annotations

import enum
import secrets
from dataclasses import dataclass, field
from typing import Any

from scramp import ScramException, ScramMechanism

from front_door.network.principal import KafkaPrincipal, user
from front_door.security.scram_credentials import ScramCredentials
from kafka_cluster.security import SaslMechanism


class SaslState(enum.Enum):
    HANDSHAKE = "HANDSHAKE_OR_VERSIONS_REQUEST"
    AUTHENTICATE = "AUTHENTICATE"
    COMPLETE = "COMPLETE"


class SaslAuthenticationFailed(Exception):
    """The client's credentials were refused; the message is the one Kafka sends to the client."""


class IllegalSaslState(Exception):
    """A request Kafka does not read in this state of the exchange: the connection closes, unanswered."""


@dataclass
class SaslConnection:
    """The exchange of one connection: `handshake`, then `authenticate` until `principal` is set."""

    enabled: tuple[SaslMechanism, ...]
    credentials: ScramCredentials
    state: SaslState = SaslState.HANDSHAKE
    mechanism: SaslMechanism | None = None
    handshake_version: int = 1
    principal: KafkaPrincipal | None = None
    failure: str | None = None  # Kafka's message for the client after a failed login
    reauthenticating: bool = False  # KIP-368: a new exchange on an authenticated connection
    previous: SaslMechanism | None = None  # ... which must use the mechanism it used before
    _scram: Any = field(default=None, repr=False)  # scramp's server, between the two SCRAM rounds
    _scram_user: str | None = None

    @property
    def raw_tokens(self) -> bool:
        """After a v0 handshake the tokens come without Kafka's request header (KIP-43)."""
        return self.state is SaslState.AUTHENTICATE and self.handshake_version == 0

    def handshake(self, mechanism: str, version: int) -> SaslMechanism | None:
        """The mechanism the client asked for, or None when it is not enabled (UNSUPPORTED_SASL_MECHANISM)."""
        if self.state is not SaslState.HANDSHAKE:
            raise IllegalSaslState("Unexpected SASL handshake request")
        chosen = next((m for m in self.enabled if m.value == mechanism), None)
        if chosen is not None:
            self.mechanism, self.handshake_version, self.state = chosen, version, SaslState.AUTHENTICATE
        return chosen

    def authenticate(self, token: bytes) -> bytes:
        """One client token -> the server's answer; `principal` is set once the exchange is complete."""
        if self.state is not SaslState.AUTHENTICATE or self.mechanism is None:
            raise IllegalSaslState("Unexpected SaslAuthenticate request during SASL handshake")
        if self.mechanism is SaslMechanism.PLAIN:
            return self._plain(token)
        return self._scram_step(token)

    def _accept_suffix_nonce(self, client_final: str) -> None:
        """Kafka's `ScramSaslServer` accepts a client-final nonce that *ends with* the server-first nonce (some
        librdkafka versions repeat the client nonce before it); the proof is over the message as sent, so
        scramp is told that nonce is the one to expect."""
        sent = str(self._scram.nonce)
        nonce = _client_final_nonce(client_final)
        if nonce is not None and nonce != sent and nonce.endswith(sent):
            self._scram.nonce = type(self._scram.nonce)(nonce)

    def _complete(self, username: str) -> None:
        self.principal, self.state = user(username), SaslState.COMPLETE

    def _plain(self, token: bytes) -> bytes:
        # PlainSaslServer.evaluateResponse: [authzid] NUL authcid NUL passwd
        parts = token.decode("utf-8", errors="replace").split("\0")
        if len(parts) != 3:
            raise SaslAuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authorization_id, username, password = parts
        if not username:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        if not self.credentials.check_plain(username, password):
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
        self._complete(username)
        return b""

    def _scram_step(self, token: bytes) -> bytes:
        assert self.mechanism is not None
        failed = SaslAuthenticationFailed(  # SaslServerAuthenticator's message for a SaslException
            f"Authentication failed during {'re-authentication' if self.reauthenticating else 'authentication'} "
            f"due to invalid credentials with SASL mechanism {self.mechanism.value}")
        try:
            message = token.decode("utf-8")
            if self._scram is None:  # client-first
                mechanism = self.mechanism

                def credential(username: str) -> tuple[bytes, bytes, bytes, int]:
                    self._scram_user = _sasl_name(username)
                    found = self.credentials.get(self._scram_user, mechanism)
                    if found is None:
                        raise ScramException("Invalid user credentials")
                    return found.salt, found.stored_key, found.server_key, found.iterations

                self._scram = ScramMechanism(mechanism.value).make_server(credential, s_nonce=server_nonce())
                self._scram.set_client_first(message)
                return str(self._scram.get_server_first()).encode()
            self._accept_suffix_nonce(message)
            self._scram.set_client_final(message)  # verifies the client's proof
            final = str(self._scram.get_server_final()).encode()
        except (ScramException, UnicodeDecodeError, ValueError) as e:
            raise failed from e
        assert self._scram_user is not None
        self._complete(self._scram_user)
        return final


def _client_final_nonce(message: str) -> str | None:
    return next((attr[2:] for attr in message.split(",") if attr.startswith("r=")), None)


def server_nonce() -> str:
    """Kafka's `ScramFormatter.secureRandomString`: 130 random bits in base 36 (digits and lowercase letters
    only; some SCRAM clients mishandle a nonce with `+` or `/`)."""
    return _base36(secrets.randbits(130))


def _base36(value: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while value:
        value, remainder = divmod(value, 36)
        out = digits[remainder] + out
    return out or "0"


def _sasl_name(username: str) -> str:
    """RFC 5802, section 5.1: `=2C` and `=3D` in a username stand for `,` and `=` (Kafka's `ScramFormatter.username`)."""
    return username.replace("=2C", ",").replace("=3D", "=")
