"""The kcat line `gateway run` logs when its front door opens (streaming/door_hint.py): on the listener a
first client can use, with what that listener needs."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import trustme

from front_door.security.config import STANDARD_AUTHORIZER, FrontDoorSecurity, load_front_door_security
from front_door.security.listeners import plaintext_listener
from streaming.door_hint import kcat_hint, listeners_line

LISTENERS = "SASL_SSL://0.0.0.0:9193,SSL://0.0.0.0:9293,PLAINTEXT://127.0.0.1:9093"
ADDRESSES = {"SASL_SSL": "localhost:9193", "SSL": "localhost:9293", "PLAINTEXT": "127.0.0.1:9093"}


@pytest.fixture(scope="module")
def door_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(str(directory / "door.pem"))
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    return directory


def _security(door_files: Path, **settings: str) -> FrontDoorSecurity:
    return load_front_door_security({"listeners": LISTENERS, "ssl.keystore.location": "door.pem",
                                     "ssl.truststore.location": "ca.pem", **settings}, door_files)


def _hint(security: FrontDoorSecurity) -> tuple[str, list[str]]:
    """The hint's words before the command, and the first kcat command's words."""
    text = kcat_hint([(li, ADDRESSES[li.name]) for li in security.listeners], security, "orders")
    who, _, line = text.partition(": echo hello | ")
    return who, shlex.split(line.split(" && ")[0])


def test_the_make_run_default_names_its_plaintext_listener_and_works_as_written() -> None:
    listener = plaintext_listener("127.0.0.1:9093", None)
    assert kcat_hint([(listener, "127.0.0.1:9093")], FrontDoorSecurity(), "demo") == (
        "try: echo hello | kcat -b 127.0.0.1:9093 -P -t demo -p 0 && "
        "kcat -b 127.0.0.1:9093 -C -t demo -p 0 -o -1 -c 1 -e")


def test_without_acls_the_plaintext_listener_is_named_whatever_comes_first(door_files: Path) -> None:
    who, words = _hint(_security(door_files))
    assert who == "try" and words[:3] == ["kcat", "-b", "127.0.0.1:9093"] and "-X" not in words


def test_with_acls_the_sasl_ssl_listener_is_named_with_its_settings(door_files: Path) -> None:
    who, words = _hint(_security(door_files, **{"authorizer.class.name": STANDARD_AUTHORIZER,
                                                "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN"}))
    assert words[:3] == ["kcat", "-b", "localhost:9193"]
    settings = [words[i + 1] for i, w in enumerate(words) if w == "-X"]
    assert settings == ["security.protocol=SASL_SSL", "sasl.mechanisms=SCRAM-SHA-256", "sasl.username=USER",
                        "sasl.password=PASSWORD", "ssl.ca.location=CA.pem"]
    assert "USER and PASSWORD of a user of the door" in who and "WRITE and READ on orders" in who


def test_an_ssl_listener_that_asks_for_certificates_gets_them_in_the_line(door_files: Path) -> None:
    security = load_front_door_security({"listeners": "SSL://0.0.0.0:9293", "ssl.keystore.location": "door.pem",
                                         "ssl.truststore.location": "ca.pem", "ssl.client.auth": "required"},
                                        door_files)
    who, words = _hint(security)
    assert words[:3] == ["kcat", "-b", "localhost:9293"]
    assert "ssl.certificate.location=CLIENT.pem" in words and "ssl.key.location=CLIENT.key" in words
    assert "a client certificate" in who


def test_plaintext_alone_under_acls_says_its_clients_are_anonymous() -> None:
    security = load_front_door_security({"listeners": "PLAINTEXT://127.0.0.1:9093",
                                         "authorizer.class.name": STANDARD_AUTHORIZER})
    who, words = _hint(security)
    assert "-X" not in words and "as User:ANONYMOUS, once it has WRITE and READ on orders" in who


def test_the_listeners_line_names_each_with_its_address(door_files: Path) -> None:
    security = _security(door_files)
    assert listeners_line([(li, ADDRESSES[li.name]) for li in security.listeners]) == (
        "SASL_SSL on localhost:9193, SSL on localhost:9293, PLAINTEXT on 127.0.0.1:9093")
