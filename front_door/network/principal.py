"""Kafka's `KafkaPrincipal`: the authenticated identity of a connection, `type:name` (e.g. `User:alice`).

A connection without authentication (PLAINTEXT, or SSL without a client certificate) is `User:ANONYMOUS`,
as Kafka's `KafkaPrincipal.ANONYMOUS`; SASL gives `User:<username>`; an SSL client certificate gives
`User:<distinguished name>` (`security/ssl_principal.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal(USER_TYPE, name)


def parse_principal(text: str) -> KafkaPrincipal:
    """`User:alice` as Kafka's `SecurityUtils.parseKafkaPrincipal` reads it: the type before the first
    colon, the name after it (a name may hold colons: `User:CN=a,O=b:c`)."""
    principal_type, sep, name = text.partition(":")
    if not sep or not principal_type or not name:
        raise ValueError(f"principal {text!r} must be of the form 'User:<name>'")
    return KafkaPrincipal(principal_type, name)
