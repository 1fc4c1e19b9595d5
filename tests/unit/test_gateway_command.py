"""One command-line shape: `gateway run|status|segments|dlq` (console script) routes to each group."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from streaming.__main__ import main


def test_segments_and_dlq_are_reached_through_gateway(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["segments", "verify", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.strip() == f"error: no segment storage at {tmp_path / 'missing'}"
    try:
        code = main(["dlq", "--help"])
    except SystemExit as e:  # argparse's help exit, when the dlq parser does not catch it
        code = e.code
    assert code == 0 and "stats" in capsys.readouterr().out


def test_console_script_is_installed() -> None:
    script = shutil.which("gateway", path=str(Path(sys.executable).parent))
    assert script is not None, "pip install -e . installs the `gateway` script ([project.scripts])"
    done = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and all(g in done.stdout for g in ("run", "status", "segments", "dlq"))


def test_run_refuses_a_bad_config_with_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "gateway.json"
    bad.write_text('{"spark_masterr": "local[2]"}')
    assert main(["run", "--config", str(bad)]) == 2  # before any JVM starts
    assert capsys.readouterr().err == f"error: {bad}: spark_masterr: unknown setting; did you mean spark_master?\n"


@pytest.mark.parametrize("key", ["startup_timeout_ms", "log_summary_interval_ms"])
@pytest.mark.parametrize("timeout", [0, -1, 1.5, "120000", True, None])
def test_run_refuses_a_time_that_is_not_a_positive_number_of_milliseconds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, timeout: object) -> None:
    bad = tmp_path / "gateway.json"
    bad.write_text(json.dumps({key: timeout}))
    assert main(["run", "--config", str(bad)]) == 2  # before any JVM starts
    assert capsys.readouterr().err == (f"error: {bad}: {key} = {json.dumps(timeout)}: expected a whole number of "
                                       "milliseconds from 1 to 2147483647\n")


def test_run_refuses_a_metrics_log_file_it_cannot_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a-file").write_text("")
    bad = tmp_path / "gateway.json"
    bad.write_text(json.dumps({"metrics_log_file": str(tmp_path / "a-file" / "metrics.jsonl")}))
    assert main(["run", "--config", str(bad)]) == 2  # before any JVM starts
    assert capsys.readouterr().err == (  # where a folder would be made
        f'error: {bad}: metrics_log_file = "{tmp_path / "a-file" / "metrics.jsonl"}": expected a file\'s path, or '
        f"null (none) ({tmp_path / 'a-file'} is a file)\n")
    bad.write_text(json.dumps({"metrics_log_file": 7}))
    assert main(["run", "--config", str(bad)]) == 2
    assert capsys.readouterr().err == f"error: {bad}: metrics_log_file = 7: expected a file's path, or null (none)\n"


def test_the_startup_timeout_is_read_from_the_config(tmp_path: Path) -> None:
    from streaming.config_file import load_gateway_config

    config = tmp_path / "gateway.json"
    config.write_text('{"startup_timeout_ms": 300000}')
    assert load_gateway_config(config).startup_timeout_ms == 300000
    config.write_text("{}")
    assert load_gateway_config(config).startup_timeout_ms == 120000


def test_submit_prints_the_spark_submit_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "gateway.json"
    config.write_text('{"spark_master": "spark://h:7077", "python_archive": "build/env.tar.gz", '
                      '"spark_conf": {"spark.executor.memory": "2g"}}')
    assert main(["submit", "--config", str(config), "--print-only"]) == 0
    line = capsys.readouterr().out.strip()
    assert "--master spark://h:7077" in line and "--jars " in line and "spark-sql-kafka-0-10" in line
    assert "env.tar.gz#environment" in line and "spark.pyspark.python=./environment/bin/python" in line
    assert "spark.executor.memory=2g" in line and line.endswith(f"gateway_submit.py run --config {config}")


@pytest.mark.parametrize(("settings", "said"), [
    ({}, "gateway door needs the gateway's Kafka cluster"),
    ({"bootstrap_servers": "127.0.0.1:1", "front_door_address": None}, "gateway door needs an address to listen on"),
    ({"bootstrap_servers": "127.0.0.1:1", "front_door_address": "0.0.0.0:19093"}, "would let anyone in"),
    ({"bootstrap_servers": "127.0.0.1:1", "front_door_adress": "127.0.0.1:0"},
     "front_door_adress: unknown setting; did you mean front_door_address?"),
])
def test_door_refuses_what_it_cannot_serve_before_anything_starts(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  settings: dict[str, object], said: str) -> None:
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps(settings))
    assert main(["door", "--config", str(config)]) == 2
    assert said in caplog.text + capsys.readouterr().err
