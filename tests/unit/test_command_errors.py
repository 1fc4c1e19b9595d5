"""Every command's bad argument, and a config it cannot use, is one `error:` line and exit status 2 before
anything is reached; a cluster that does not answer is one line after the command's timeout, without
librdkafka's line per failed connection attempt; `gateway status` reads only the exporter of its config's query."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from embedded.local_kafka import free_port
from front_door.metrics import FrontDoorMetrics
from sinks.dlq.cli import read_config_file
from sinks.metrics.gateway_metrics import GatewayMetrics
from sinks.metrics.health import Health
from sinks.metrics.server import serve_metrics
from streaming.__main__ import _dlq_config
from streaming.__main__ import main as gateway
from streaming.config import REPO_ROOT

UNREACHABLE = "127.0.0.1:1"  # nothing listens on port 1


def _one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one stderr line of a refused command (status 2)."""
    try:
        code = gateway(argv)
    except SystemExit as e:  # argparse's refusal
        code = e.code
    out = capsys.readouterr()
    assert code == 2 and "Traceback" not in out.err, out
    lines = out.err.splitlines()
    assert len(lines) == 1, out.err
    return lines[0]


# ------------------------------------------------------------------------------------------------ arguments


ARGUMENTS: list[tuple[list[str], str]] = [
    (["dlq", "list", "--error", "NOPE"], "error: gateway dlq list: argument --error: 'NOPE' is not a Kafka error "
     "the gateway rejects with; one of UNKNOWN_SERVER_ERROR, CORRUPT_MESSAGE,"),
    (["dlq", "list", "--error", "INVALID_TIMESTAMPS"], "did you mean INVALID_TIMESTAMP?"),
    (["dlq", "stats", "--timeout", "0"], "error: gateway dlq stats: argument --timeout: expected a positive number of "
     "seconds, got '0'"),
    (["dlq", "list", "--limit", "0"], "argument --limit: expected a whole number of at least 1, got '0'"),
    (["dlq", "list", "--since", "yesterday"], "argument --since: cannot read time 'yesterday'"),
    (["dlq", "list", "--bootstrap-servers", "kafka-1"], "argument --bootstrap-servers: 'kafka-1': expected "
     "HOST:PORT[,HOST:PORT...] (no :PORT)"),
    (["dlq", "list", "--target-partition", "-1"], "argument --target-partition: expected a whole number of at least "
     "0, got '-1'"),
    (["dlq", "list", "--position", "1-2"], "argument --position: a dead letter's position is PARTITION:OFFSET, got "
     "'1-2'"),
    (["dlq", "list", "--topic", "a b"], "argument --topic: Topic name is invalid: 'a b' contains"),
    (["dlq", "list", "--principal", "alice"], "argument --principal: expected a principal TYPE:NAME such as "
     "User:alice, got 'alice'"),
    (["dlq", "show", "0-42"], "error: gateway dlq show: argument position: a dead letter's position is"),
    (["dlq", "replay", "--all", "--to-partition", "x"], "argument --to-partition: expected a whole number of at "
     "least 0, got 'x'"),
    (["dlq", "list", "--format", "xml"], "argument --format: invalid choice: 'xml'"),
    (["status", "--metrics-url", "127.0.0.1:9108"], "error: gateway status: argument --metrics-url: expected an "
     "http:// URL such as http://127.0.0.1:9108/metrics, got '127.0.0.1:9108'"),
    (["status", "--errors", "-1"], "argument --errors: expected a whole number of at least 0, got '-1'"),
    (["status", "--timeout", "soon"], "argument --timeout: expected a positive number of seconds, got 'soon'"),
    (["status", "--bootstrap-servers", "k:99999"], "argument --bootstrap-servers: 'k:99999': expected "
     "HOST:PORT[,HOST:PORT...] (port 99999 is outside 1..65535)"),
    (["users", "list", "--timeout", "-1"], "error: gateway users list: argument --timeout: expected a positive "
     "number of seconds, got '-1'"),
    (["users", "delete", "alice", "--yes"], "the following arguments are required: --mechanism"),
    (["acls", "--principal", "gateway"], "error: gateway acls: argument --principal: expected a principal TYPE:NAME "
     "such as User:alice, got 'gateway'"),
    (["door", "--listen", "127.0.0.1:abc"], "error: gateway door: argument --listen: '127.0.0.1:abc': expected "
     "HOST:PORT (port 0: a free one) (port 'abc' is not a number)"),
    (["door", "--advertised", "gw.example.com:0"], "argument --advertised: 'gw.example.com:0': expected HOST:PORT "
     "(port 0 is outside 1..65535)"),
    (["door", "--id", "0"], "argument --id: '0': expected a whole number from 1 to 2147483647"),
    (["door", "--metrics-address", "9108"], "argument --metrics-address: '9108': expected HOST:PORT (port 0: a free "
     "one) (no :PORT)"),
    (["run", "--master", "lokal[2]"], "error: gateway run: argument --master: 'lokal[2]': expected a Spark master "
     "URL"),
    (["run", "--bootstrap-servers", "kafka-1:9092,"], "argument --bootstrap-servers: 'kafka-1:9092,': expected "
     "HOST:PORT[,HOST:PORT...] ('': no :PORT)"),
    (["run", "--conf", "novalue"], "argument --conf: expected KEY=VALUE, got 'novalue'"),
    (["submit", "--master", "yarn-cluster"], "error: gateway submit: argument --master: 'yarn-cluster': expected a "
     "Spark master URL"),
    (["segments", "read", "var/segments", "t", "p0"], "error: gateway segments read: argument partition"),
    (["bogus"], "error: gateway: argument group: invalid choice: 'bogus'"),
]


@pytest.mark.parametrize(("argv", "said"), ARGUMENTS, ids=[" ".join(a) for a, _ in ARGUMENTS])
def test_a_bad_argument_is_one_line_and_exit_2(argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = _one_line(argv, capsys)
    assert said in line and line.startswith("error: gateway"), line
    assert line.endswith("--help)")  # where the usage is, instead of the whole usage


def test_an_error_code_reads_as_its_name() -> None:
    from sinks.dlq.cli import build_parser

    args = build_parser().parse_args(["list", "--error", "32", "--error", "corrupt_message"])
    assert args.error == ["INVALID_TIMESTAMP", "CORRUPT_MESSAGE"]


@pytest.mark.parametrize("argv", [
    ["run"], ["status"], ["acls"], ["client-properties", "--output", "client.properties"], ["users", "list"],
    ["door"], ["submit", "--print-only"], ["dlq", "list"],
])
def test_every_command_refuses_a_config_it_cannot_use_in_one_line(argv: list[str], tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"bootstrap_servers": UNREACHABLE, "local_broker_port": "nine"}))
    line = _one_line([*argv, "--config", str(config)], capsys)
    assert line == f'error: {config}: local_broker_port = "nine": expected a whole number from 1 to 65535'


# ------------------------------------------------------------------------------------------------ the dlq's topics


def test_dlq_reads_the_dead_letter_and_ingress_topics_of_its_config(tmp_path: Path) -> None:
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"bootstrap_servers": UNREACHABLE, "dlq_topic": "ops.dead",
                                  "ingress_topic": "ops.in"}))
    for read in (_dlq_config, read_config_file):  # `gateway dlq`, `python -m sinks dlq`
        read_from = read(config, None)
        assert (read_from.cluster.bootstrap_servers, read_from.dlq_topic, read_from.ingress_topic) == (
            UNREACHABLE, "ops.dead", "ops.in")
        assert read(config, "other:9092").cluster.bootstrap_servers == "other:9092"


# ------------------------------------------------------------------------------------------------ unreachable


def _command(*argv: str) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own: what librdkafka writes to the real stderr is seen."""
    return subprocess.run([sys.executable, "-m", "streaming", *argv], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=300, check=False)


def test_dlq_against_an_unreachable_cluster_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"bootstrap_servers": UNREACHABLE, "dlq_topic": "ops.dead"}))
    done = _command("dlq", "list", "--config", str(config), "--timeout", "2")
    assert done.returncode == 1 and done.stdout == "", done  # 1: a Kafka problem
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"dlq: cannot read ops.dead: no answer from the Kafka cluster at {UNREACHABLE} "
                                  "(PLAINTEXT) within 2 s"), done.stderr


def test_users_against_an_unreachable_cluster_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"bootstrap_servers": UNREACHABLE}))
    done = _command("users", "list", "--config", str(config), "--timeout", "2")
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"error: no answer from the Kafka cluster at {UNREACHABLE}"), done.stderr


def test_status_with_an_unreachable_cluster_says_so_in_its_report_and_nothing_else(tmp_path: Path) -> None:
    metrics = GatewayMetrics({"t": 1})
    metrics.describe_query("gateway", "0")
    server = serve_metrics(metrics, "127.0.0.1:0", Health())
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"bootstrap_servers": UNREACHABLE}))
    try:
        done = _command("status", "--config", str(config), "--metrics-url", server.url, "--timeout", "2")
    finally:
        server.stop()
    assert done.returncode == 1 and done.stderr == "", done  # 1: the exporter answers, the query is not active
    assert (f"recent errors    unavailable: cannot read 'gateway.responses' from Kafka at {UNREACHABLE}: "
            in done.stdout), done.stdout


# ------------------------------------------------------------------------------------------------ status's exporter


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"query_name": "orders", "bootstrap_servers": UNREACHABLE,
                                  "metrics_address": f"127.0.0.1:{free_port()}"}))
    return config


def _status_of(exported: Any, config: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    server = serve_metrics(exported, "127.0.0.1:0", Health())
    try:
        code = gateway(["status", "--config", str(config), "--metrics-url", server.url, "--errors", "0"])
    finally:
        server.stop()
    out = capsys.readouterr()
    return code, out.out, out.err


def test_status_refuses_the_exporter_of_another_query(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = GatewayMetrics({"t": 1})
    other.describe_query("gateway", "0.9.0")
    code, out, err = _status_of(other, config_file, capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert err.startswith("error: http://127.0.0.1:") and err.endswith(
        "the metrics there are of query 'gateway', not of 'orders' (query_name of the config); give that query's "
        "--config, or --metrics-url of this one's driver\n")


def test_status_refuses_an_exporter_of_no_query(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _status_of(FrontDoorMetrics(), config_file, capsys)  # what `gateway door` exports
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "no gateway query exports its metrics there (no gateway_query_info: a `gateway door`'s exporter" in err


def test_status_reports_the_exporter_of_its_query(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    own = GatewayMetrics({"t": 1})
    own.describe_query("orders", "0.9.0")
    own.set_query_active(True)
    code, out, err = _status_of(own, config_file, capsys)
    assert (code, err) == (0, "") and "query            running; no micro-batch completed yet" in out


def test_a_standby_without_a_cluster_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "gateway.json"
    config.write_text("{}")
    assert _one_line(["run", "--standby", "--config", str(config)], capsys) == (
        f"error: {config}: bootstrap_servers is not set: --standby needs the active driver's Kafka cluster (or "
        "--bootstrap-servers; an embedded broker belongs to the driver that started it)")
