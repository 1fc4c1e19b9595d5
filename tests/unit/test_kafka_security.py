"""The `kafka` security block: resolution of secrets, the errors that name the setting, and the one
translation into librdkafka, Kafka Java client, Spark and `--command-config` properties."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from kafka_cluster.security import (
    PLAINTEXT,
    KafkaCluster,
    KafkaSecurityError,
    SaslMechanism,
    SecurityProtocol,
    literal_secrets,
    load_cluster_file,
    load_kafka_security,
)
from streaming.config_file import load_gateway_config

CA = "-----BEGIN CERTIFICATE-----\nMIIca\n-----END CERTIFICATE-----\n"
CERT = "-----BEGIN CERTIFICATE-----\nMIIcert\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nMIIkey\n-----END PRIVATE KEY-----\n"
PASSWORD = 'p"w\\d-Secret'


@pytest.fixture
def pems(tmp_path: Path) -> Path:
    (tmp_path / "ca.pem").write_text(CA)
    (tmp_path / "client.pem").write_text(CERT)
    (tmp_path / "client.key").write_text(KEY)
    (tmp_path / "password").write_text(PASSWORD + "\n")
    return tmp_path


def sasl_ssl(pems: Path, **extra: str) -> dict[str, str]:
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "gateway",
            "sasl.password": f"${{file:{pems / 'password'}}}", "ssl.ca.location": str(pems / "ca.pem"), **extra}


def test_no_block_is_plaintext() -> None:
    assert load_kafka_security(None) is PLAINTEXT
    assert load_kafka_security({}) is PLAINTEXT
    assert KafkaCluster("h:1").client({"linger.ms": 5}) == {"linger.ms": 5, "bootstrap.servers": "h:1",
                                                            "security.protocol": "PLAINTEXT"}


def test_sasl_ssl_scram_for_librdkafka_java_and_spark(pems: Path) -> None:
    security = load_kafka_security(sasl_ssl(pems))
    assert security.protocol is SecurityProtocol.SASL_SSL and security.mechanism is SaslMechanism.SCRAM_SHA_512
    assert security.librdkafka() == {
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "gateway",
        "sasl.password": PASSWORD, "ssl.endpoint.identification.algorithm": "https", "ssl.ca.pem": CA}
    java = security.java()
    assert java["sasl.jaas.config"] == ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                        'username="gateway" password="p\\"w\\\\d-Secret";')
    assert java["ssl.truststore.type"] == "PEM" and java["ssl.truststore.certificates"] == CA
    assert "ssl.keystore.key" not in java
    cluster = KafkaCluster("broker:9093", security)
    options = cluster.spark_options()
    assert options["kafka.bootstrap.servers"] == "broker:9093"
    assert options["kafka.sasl.jaas.config"] == java["sasl.jaas.config"]
    # the cluster's security wins over a caller's settings: nothing connects around it
    assert cluster.client({"security.protocol": "PLAINTEXT"})["security.protocol"] == "SASL_SSL"


def test_plain_mechanism_uses_the_plain_login_module(pems: Path) -> None:
    security = load_kafka_security(sasl_ssl(pems, **{"sasl.mechanism": "plain"}))
    assert security.java()["sasl.jaas.config"].startswith("org.apache.kafka.common.security.plain.PlainLoginModule ")
    assert security.librdkafka()["sasl.mechanisms"] == "PLAIN"


def test_mtls_gives_the_client_certificate_inline_to_both_clients(pems: Path) -> None:
    security = load_kafka_security({"security.protocol": "SSL", "ssl.ca.location": "ca.pem",
                                    "ssl.certificate.location": "client.pem", "ssl.key.location": "client.key",
                                    "ssl.endpoint.identification.algorithm": "none"}, pems)
    assert security.librdkafka() == {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "none",
                                     "ssl.ca.pem": CA, "ssl.certificate.pem": CERT, "ssl.key.pem": KEY}
    java = security.java()
    assert java["ssl.keystore.type"] == "PEM" and java["ssl.keystore.certificate.chain"] == CERT
    assert java["ssl.keystore.key"] == KEY and java["ssl.endpoint.identification.algorithm"] == ""
    assert "sasl.jaas.config" not in java


def test_env_secrets(pems: Path) -> None:
    block = sasl_ssl(pems, **{"sasl.password": "${env:GW_PASSWORD}"})
    assert load_kafka_security(block, environ={"GW_PASSWORD": "from-env"}).librdkafka()["sasl.password"] == "from-env"
    with pytest.raises(KafkaSecurityError, match=r"kafka.sasl.password: environment variable GW_PASSWORD is not set"):
        load_kafka_security(block, environ={})


@pytest.mark.parametrize(("change", "message"), [
    ({"security.protocol": "SASL_TLS"}, r"kafka.security.protocol: unknown protocol 'SASL_TLS'"),
    ({"sasl.mechanism": "GSSAPI"}, r"kafka.sasl.mechanism: unsupported mechanism 'GSSAPI'; one of PLAIN, "),
    ({"sasl.mechanism": None}, r"kafka.sasl.mechanism: SASL_SSL needs a mechanism"),
    ({"sasl.password": None}, r"kafka.sasl.password: SASL_SSL with SCRAM-SHA-512 needs it"),
    ({"sasl.password": "${file:/nonexistent/pw}"}, r"kafka.sasl.password: file /nonexistent/pw does not exist"),
    ({"ssl.ca.location": "/nonexistent/ca.pem"}, r"kafka.ssl.ca.location: file /nonexistent/ca.pem does not exist"),
    ({"ssl.certificate.location": "CERT"}, r"a client certificate needs its key"),
    ({"sasl.kerberos.service.name": "kafka"}, r"kafka: unknown setting\(s\) sasl.kerberos.service.name"),
    ({"security.protocol": "SSL"}, r"kafka.sasl.mechanism: set, but security.protocol SSL uses no SASL"),
])
def test_a_wrong_block_names_the_setting(pems: Path, change: dict[str, str | None], message: str) -> None:
    block = {**sasl_ssl(pems), **{k: v for k, v in change.items() if v is not None}}
    for k, v in change.items():
        if v is None:
            del block[k]
        elif v == "CERT":
            block[k] = str(pems / "client.pem")
    with pytest.raises(KafkaSecurityError, match=message):
        load_kafka_security(block)


def test_a_ca_file_that_is_not_pem(pems: Path) -> None:
    (pems / "ca.txt").write_text("not a certificate\n")
    with pytest.raises(KafkaSecurityError, match=r"kafka.ssl.ca.location: .*ca.txt is not a PEM file"):
        load_kafka_security(sasl_ssl(pems, **{"ssl.ca.location": str(pems / "ca.txt")}))
    (pems / "ca.der").write_bytes(b"\x30\x82\x01")
    with pytest.raises(KafkaSecurityError, match=r"kafka.ssl.ca.location: .*ca.der is not text"):
        load_kafka_security(sasl_ssl(pems, **{"ssl.ca.location": str(pems / "ca.der")}))


def test_secrets_are_hidden_wherever_printed_and_travel_pickled(pems: Path) -> None:
    security = load_kafka_security({**sasl_ssl(pems), "security.protocol": "SASL_SSL",
                                    "ssl.certificate.location": str(pems / "client.pem"),
                                    "ssl.key.location": str(pems / "client.key")})
    cluster = KafkaCluster("b:1", security)
    for text in (repr(cluster), str(security)):  # a config logged by mistake shows no secret
        assert "password=[hidden]" in text and "key_pem=[hidden]" in text
        assert PASSWORD not in text and "MIIkey" not in text
    assert security.describe() == "SASL_SSL, SCRAM-SHA-512 as gateway, client certificate"
    copy = pickle.loads(pickle.dumps(cluster))  # executors get the cluster with the task
    assert copy == cluster and copy.client()["sasl.password"] == PASSWORD


def test_command_config_is_a_java_properties_file(pems: Path, tmp_path: Path) -> None:
    security = load_kafka_security({"security.protocol": "SSL", "ssl.ca.location": str(pems / "ca.pem"),
                                    "ssl.certificate.location": str(pems / "client.pem"),
                                    "ssl.key.location": str(pems / "client.key")})
    text = security.command_config()
    lines = dict(line.split("=", 1) for line in text.splitlines())
    assert lines["security.protocol"] == "SSL" and lines["ssl.truststore.type"] == "PEM"
    # one line per property; java.util.Properties turns \n back into the PEM's line breaks
    assert lines["ssl.keystore.key"] == KEY.replace("\n", "\\n")


def test_literal_secrets_are_reported() -> None:
    assert literal_secrets({"sasl.password": "hunter2", "ssl.key.password": "${env:K}"}) == ["sasl.password"]
    assert literal_secrets(None) == []


def test_the_gateway_config_fails_at_load_naming_the_setting(tmp_path: Path) -> None:
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps({"bootstrap_servers": "b:1", "kafka": {"security.protocol": "SASL_SSL",
                                                                      "sasl.mechanism": "OAUTH"}}))
    with pytest.raises(ValueError, match=r"kafka.sasl.mechanism: unsupported mechanism 'OAUTH'"):
        load_gateway_config(path)


def test_a_config_file_gives_the_commands_their_cluster(pems: Path, tmp_path: Path) -> None:
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps({"bootstrap_servers": "b:9093", "kafka": sasl_ssl(pems)}))
    config = load_gateway_config(path)
    assert load_cluster_file(path) == config.cluster
    assert load_cluster_file(path, "other:1").bootstrap_servers == "other:1"
    path.write_text(json.dumps({"bootstrap_servers": None, "local_broker_port": 9999}))
    assert load_cluster_file(path) == KafkaCluster("127.0.0.1:9999")
