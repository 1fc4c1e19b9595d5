"""The ingress contract: one definition of the headers and key every producer writes (docs/design.md: ingress topic)."""

from __future__ import annotations

from contract.ingress import (
    HEADER_ACKS,
    HEADER_CLIENT_ID,
    HEADER_PRINCIPAL,
    HEADER_REPLAY_OF,
    ingress_headers,
    ingress_key,
)


def test_required_headers_only_when_nothing_optional_is_given() -> None:
    assert ingress_headers("orders", 3, "r-1") == [
        ("gw.topic", b"orders"), ("gw.partition", b"3"), ("gw.request.id", b"r-1")]


def test_optional_headers_and_key() -> None:
    headers = dict(ingress_headers("t", 0, "r", client_id="c", acks=0, replay_of="gateway.dlq:1:7",
                                   principal="User:alice"))
    assert headers[HEADER_PRINCIPAL] == b"User:alice"
    assert headers[HEADER_CLIENT_ID] == b"c" and headers[HEADER_ACKS] == b"0"
    assert headers[HEADER_REPLAY_OF] == b"gateway.dlq:1:7"
    assert ingress_key("t", 0) == b"t/0"
