"""One connection's SASL exchange (`front_door/security/sasl_server.py`) with scramp's client, against the
users of an in-memory security store: Kafka's messages, states and mechanisms."""

from __future__ import annotations

import asyncio

import pytest
from scramp import ScramClient

from front_door.security.sasl_server import (
    IllegalSaslState,
    SaslAuthenticationFailed,
    SaslConnection,
    SaslState,
    server_nonce,
)
from front_door.security.scram_credentials import ScramCredential, ScramCredentials
from kafka_cluster.security import SaslMechanism
from tests.memory_security_store import MemorySecurityStore

ALL = (SaslMechanism.SCRAM_SHA_512, SaslMechanism.SCRAM_SHA_256, SaslMechanism.PLAIN)


@pytest.fixture
def credentials() -> ScramCredentials:
    users = ScramCredentials(MemorySecurityStore())
    for mechanism in (SaslMechanism.SCRAM_SHA_256, SaslMechanism.SCRAM_SHA_512):
        asyncio.run(users.upsert("alice", ScramCredential.from_password(mechanism, "alice-secret", 4096)))
    return users


def _scram(credentials: ScramCredentials, mechanism: str, user: str, password: str) -> SaslConnection:
    conn = SaslConnection(ALL, credentials)
    assert conn.handshake(mechanism, 1) is not None
    client = ScramClient([mechanism], user, password)
    client.set_server_first(conn.authenticate(client.get_client_first().encode()).decode())
    client.set_server_final(conn.authenticate(client.get_client_final().encode()).decode())  # checks the server
    return conn


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
def test_scram_authenticates_the_user_and_proves_the_server(credentials: ScramCredentials, mechanism: str) -> None:
    conn = _scram(credentials, mechanism, "alice", "alice-secret")
    assert (str(conn.principal), conn.state) == ("User:alice", SaslState.COMPLETE)


@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("nobody", "alice-secret")])
def test_scram_refuses_with_kafkas_message(credentials: ScramCredentials, user: str, password: str) -> None:
    with pytest.raises(SaslAuthenticationFailed, match="^Authentication failed during authentication due to invalid "
                                                       "credentials with SASL mechanism SCRAM-SHA-512$"):
        _scram(credentials, "SCRAM-SHA-512", user, password)


@pytest.mark.parametrize("token,message", [
    (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
    (b"\0\0alice-secret", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"bob\0alice\0alice-secret", "Client requested an authorization id that is different from username"),
])
def test_plain_refuses_with_kafkas_messages(credentials: ScramCredentials, token: bytes, message: str) -> None:
    conn = SaslConnection(ALL, credentials)
    conn.handshake("PLAIN", 1)
    with pytest.raises(SaslAuthenticationFailed, match=message):
        conn.authenticate(token)
    assert conn.principal is None


def test_plain_checks_the_password_against_the_scram_credentials(credentials: ScramCredentials) -> None:
    conn = SaslConnection(ALL, credentials)
    conn.handshake("PLAIN", 1)
    assert conn.authenticate(b"alice\0alice\0alice-secret") == b""
    assert str(conn.principal) == "User:alice"


def test_the_handshake_names_an_enabled_mechanism_once(credentials: ScramCredentials) -> None:
    conn = SaslConnection((SaslMechanism.SCRAM_SHA_512,), credentials)
    assert conn.handshake("PLAIN", 1) is None  # not enabled: UNSUPPORTED_SASL_MECHANISM
    assert conn.handshake("SCRAM-SHA-512", 0) is SaslMechanism.SCRAM_SHA_512
    assert conn.raw_tokens  # v0: bare tokens follow
    with pytest.raises(IllegalSaslState):
        conn.handshake("SCRAM-SHA-512", 1)


def test_a_token_before_the_handshake_is_an_illegal_state(credentials: ScramCredentials) -> None:
    with pytest.raises(IllegalSaslState):
        SaslConnection(ALL, credentials).authenticate(b"\0alice\0alice-secret")


def test_the_server_nonce_is_kafkas_base_36() -> None:
    nonces = {server_nonce() for _ in range(100)}
    assert len(nonces) == 100
    assert all(n.isalnum() and n == n.lower() and 20 <= len(n) <= 26 for n in nonces)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
def test_a_replayed_scram_exchange_does_not_log_in(credentials: ScramCredentials, mechanism: str) -> None:
    """A client's messages captured from a successful login and sent again on a new connection: the server's
    nonce is new, so the captured proof does not match it (RFC 5802 §9); on the logged-in connection a
    further token is an illegal state."""
    conn = SaslConnection(ALL, credentials)
    conn.handshake(mechanism, 1)
    client = ScramClient([mechanism], "alice", "alice-secret")
    first = client.get_client_first().encode()
    client.set_server_first(conn.authenticate(first).decode())
    final = client.get_client_final().encode()
    conn.authenticate(final)
    assert conn.state == SaslState.COMPLETE
    with pytest.raises(IllegalSaslState):
        conn.authenticate(final)

    replayed = SaslConnection(ALL, credentials)
    replayed.handshake(mechanism, 1)
    replayed.authenticate(first)
    with pytest.raises(SaslAuthenticationFailed):
        replayed.authenticate(final)
    assert replayed.state != SaslState.COMPLETE
