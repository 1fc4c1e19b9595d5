"""One command-line shape: `gateway run|status|segments|dlq` (console script) routes to each group."""

from __future__ import annotations

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
