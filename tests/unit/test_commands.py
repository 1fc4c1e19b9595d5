"""The command line as a user meets it: `--version`, help that names each command as it is typed, every
argument explained, exit codes, destructive commands behind `--yes`, and bad input as one line, never a
traceback."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from sinks.__main__ import build_parser as sinks_parser
from sinks.dlq.cli import build_parser as dlq_parser
from streaming import version
from streaming.__main__ import build_parser as gateway_parser
from streaming.__main__ import main as gateway
from validators.__main__ import build_parser as validators_parser

REPO = Path(__file__).resolve().parents[2]
PYPROJECT_VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def test_gateway_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        gateway(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"gateway {version.gateway_version()}"


def test_python_m_streaming_version() -> None:
    done = subprocess.run([sys.executable, "-m", "streaming", "--version"], capture_output=True, text=True,
                          cwd=REPO, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip() == f"gateway {version.gateway_version()}"


def test_the_version_comes_from_the_metadata_else_pyproject(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(version.metadata, "version", lambda _name: "7.7.7")
    assert version.gateway_version() == "7.7.7"

    def absent(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(version.metadata, "version", absent)
    assert version.gateway_version() == PYPROJECT_VERSION


def _parsers() -> dict[str, argparse.ArgumentParser]:
    """Every parser, by the command line that reaches it."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        found[name] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    walk(f"{name} {sub}", child)

    walk("gateway", gateway_parser())
    walk("gateway dlq", dlq_parser("gateway dlq"))
    walk("python -m sinks", sinks_parser())
    walk("python -m validators", validators_parser())
    return found


def test_every_argument_has_help() -> None:
    missing = [f"{name}: {action.dest}" for name, parser in _parsers().items() for action in parser._actions
               if not action.help and not isinstance(action, argparse._SubParsersAction)]
    assert missing == []


def test_config_has_help_and_shows_its_default() -> None:
    configs = [(name, action) for name, parser in _parsers().items() for action in parser._actions
               if "--config" in action.option_strings and action.type is Path]  # the gateway's config file
    assert len(configs) >= 9  # run, status, submit, acls, client-properties and the four dlq commands
    for name, action in configs:
        assert "default" in action.help, name
        assert action.default is None or "%(default)s" in action.help, name


def test_gateway_dlq_names_itself(capsys: pytest.CaptureFixture[str]) -> None:
    assert gateway(["dlq", "--help"]) == 0
    help_text = capsys.readouterr().out
    assert help_text.startswith("usage: gateway dlq ") and "python -m sinks" not in help_text
    assert "exit status" in help_text


def test_offsets_for_times_reads_the_dlq_time_forms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sinks.__main__ import main as sinks

    assert sinks(["segments", "offsets-for-times", str(tmp_path), "t", "0", "yesterday"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("error: cannot read time 'yesterday': use epoch milliseconds, ISO-8601 "
                           "(e.g. 2024-05-01T12:00:00Z) or relative -15m/-2h/-7d, or latest, earliest, max-timestamp")
    for when in ("-2h", "2024-05-01T12:00:00Z", "1714564800000", "latest"):  # read; then the storage is missing
        assert sinks(["segments", "offsets-for-times", str(tmp_path), "t", "0", when, "--json"]) == 2
        assert capsys.readouterr().err.strip() == f"error: no partition directory {tmp_path / 't-0'}"


def test_offsets_for_times_by_relative_time_on_real_storage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from tests.unit.test_recovery import fill

    fill(tmp_path, 3, batch_id=1)  # timestamps of 2023-11-14
    assert gateway(["segments", "offsets-for-times", str(tmp_path), "t", "0", "2023-11-14T22:13:20.001Z",
                    "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["offset"] == 1
    assert gateway(["segments", "offsets-for-times", str(tmp_path), "t", "0", "-1d", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["offset"] == -1  # nothing as recent as a day ago


def test_truncate_refuses_without_yes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.unit.test_recovery import fill, log_files, read_commit

    fill(tmp_path, 5, batch_id=1)
    end = read_commit(log_files(tmp_path)).log_end_offset
    assert gateway(["segments", "truncate", str(tmp_path), "t", "0", "--to", "1"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"truncate would drop every batch of t-0 at or after offset 1 in {tmp_path}, for good; add --yes to do it")
    assert read_commit(log_files(tmp_path)).log_end_offset == end


@pytest.mark.parametrize("argv", [
    ["segments", "read", "/nonexistent", "t", "x"],
    ["segments", "dump"],
    ["run", "--conf", "novalue"],
])
def test_usage_errors_exit_2_with_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        gateway(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.splitlines()) == 1 and err.startswith("error: gateway ")


@pytest.mark.parametrize("argv", [
    ["client-properties", "--output", "/nonexistent/dir/client.properties"],
    ["status", "--config", "/nonexistent/gateway.json"],
    ["submit", "--config", "/nonexistent/gateway.json", "--print-only"],
    ["acls", "--config", "/nonexistent/gateway.json"],
    ["segments", "verify", "/nonexistent", "t"],
    ["segments", "dump", "/nonexistent", "t", "0"],
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str],
                                          caplog: pytest.LogCaptureFixture) -> None:
    assert gateway(argv) == 2
    out = capsys.readouterr()
    assert "Traceback" not in out.err + caplog.text
    assert len((out.err.strip().splitlines() or []) + [r for r in caplog.records if r.levelname == "ERROR"]) >= 1
