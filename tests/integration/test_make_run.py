"""`make run`'s command on its embedded default: its own local broker, local Spark, demo traffic,
live summary at no more than a line a second; Ctrl-C (SIGINT) stops everything and leaves no JVM behind."""

from __future__ import annotations

import json
import os
import re
import signal
import struct
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from embedded.local_kafka import free_port
from storage.commit_record import read_commit
from streaming.config import REPO_ROOT

pytestmark = pytest.mark.integration


def _java_processes_under(path: Path) -> list[str]:
    out = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if "java" in line and str(path) in line]


# The demo's run window the line count looks at: from its first response on, this many of the demo's summaries
# (one every 3 s) and at least one of the gateway's (one per 10 s).
DEMO_SUMMARIES = 5
# librdkafka's lines known to be harmless (kafka_cluster/client_log.py): at DEBUG, so never in `make run`'s output
HARMLESS = ("Coordinator load in progress", "unserved events")


def _demo_summary(line: str) -> bool:
    return "gateway.demo responses:" in line and "OK=" in line


def _ran_long_enough(lines: list[str]) -> bool:
    """Past the first response: DEMO_SUMMARIES summaries of the demo's and one of the gateway's."""
    first = next((i for i, line in enumerate(lines) if "first response" in line), None)
    if first is None:
        return False
    after = lines[first + 1:]
    return sum(map(_demo_summary, after)) >= DEMO_SUMMARIES and any(" INFO gateway.metrics last " in line
                                                                     for line in after)


def _logged_at(line: str) -> datetime:
    """The time a log line was written (LOG_FORMAT's asctime: `2026-11-29 00:06:44,275 INFO ...`)."""
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")


def test_run_demo_answers_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    config = json.loads((REPO_ROOT / "conf" / "gateway.json").read_text())
    config.update(
        bootstrap_servers=None, local_broker_port=free_port(), local_broker_dir=str(tmp_path / "kafka"),
        segments_root=str(tmp_path / "segments"), checkpoint_root=str(tmp_path / "checkpoints"),
        spark_master="local[2]", shuffle_partitions=2, ui_enabled=False, front_door_address="127.0.0.1:0",
    )
    config_file = tmp_path / "gateway.json"
    config_file.write_text(json.dumps(config))
    proc = subprocess.Popen(
        [sys.executable, "-m", "streaming", "run", "--demo", "--config", str(config_file)],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy(),
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 300
        assert proc.stdout is not None
        for line in proc.stdout:  # blocks on the child's output; the deadline bounds the wait
            lines.append(line)
            if _ran_long_enough(lines) or time.monotonic() > deadline:
                break
        assert _ran_long_enough(lines), "".join(lines[-40:])
        # once the demo runs, at most a line a second on average: the demo's summaries and the gateway's
        first = next(i for i, line in enumerate(lines) if "first response" in line)
        window = lines[first + 1:]
        seconds = (_logged_at(window[-1]) - _logged_at(lines[first])).total_seconds()
        assert len(window) <= seconds, f"{len(window)} lines in {seconds:.1f} s:\n" + "".join(window)
        assert not any(" INFO gateway.metrics {" in line for line in lines), "a micro-batch's own line at INFO"
        assert _java_processes_under(tmp_path / "kafka"), "the local broker should be running"
        # the front door's address, and its one-line kcat example works as written
        assert any(re.search(r"front door on 127\.0\.0\.1:\d+$", line.rstrip()) for line in lines), "".join(lines[-40:])
        (example,) = [line.split("try: ", 1)[1].strip() for line in lines if "try: " in line and "kcat" in line]
        tried = subprocess.run(example, shell=True, capture_output=True, text=True, timeout=120)
        assert tried.returncode == 0 and tried.stdout.splitlines() == ["hello"], (tried.stdout, tried.stderr)
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=120)
        lines.append(rest)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = "".join(lines)
    assert proc.returncode == 0, output[-4000:]
    assert " INFO gateway stopped." in output
    assert not [line for line in output.splitlines() if any(h in line for h in HARMLESS)], output[-4000:]
    # Ctrl-C mostly lands in a micro-batch (the demo keeps one running): it stops without a traceback or an error
    noise = [line for line in output.splitlines() if any(n in line for n in (" ERROR ", "Traceback", "Exception in"))]
    assert not noise, output[-4000:]
    assert re.search(r"closed [1-9][0-9]* partition log\(s\) cleanly", output), output[-4000:]
    assert not _java_processes_under(tmp_path / "kafka"), "orphan broker JVM after Ctrl-C"
    logs = list((tmp_path / "segments").glob("demo.*/*.log"))
    assert logs and all(f.stat().st_size > 0 for f in logs)
    # a clean stop closes each log as Kafka does: the active segment's time index ends with its max timestamp
    for directory in {f.parent for f in logs}:
        active = read_commit(directory).segments[-1]
        entries = (directory / f"{active.base_offset:020d}.timeindex").read_bytes()
        if active.max_timestamp is not None and active.max_timestamp >= 0:
            assert struct.unpack(">qi", entries[-12:]) == (active.max_timestamp, active.max_timestamp_offset - active.base_offset)
