"""The batch spool between the stage and the sink's task (`sinks.batch_spool`): bytes come back exactly,
rows not spooled pass through, hostile topic names stay inside the spool directory, files are removed
by the task and stale ones swept; and the stage's emitted frame carries no batch bytes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sinks import batch_spool
from sinks.batch_spool import remove_spools, spool_rows, unspool_rows
from streaming.stage import stage_frame
from tests.decision_rows import decision_row


def test_bytes_come_back_exactly(tmp_path: Path) -> None:
    rows = [decision_row(batch=bytes([i % 256]) * i, base_offset=i) for i in range(0, 300, 7)]
    rows.append(decision_row(batch=b"", base_offset=999))
    spooled = spool_rows(rows, "orders-3", tmp_path)
    assert all(r.batch is None and r.spool is not None for r in spooled)
    assert len({r.spool for r in spooled}) == 1
    back, files = unspool_rows(spooled)
    assert back == rows
    assert files == [Path(spooled[0].spool)]
    remove_spools(files)
    assert list(tmp_path.iterdir()) == []


def test_rows_not_spooled_pass_unchanged() -> None:
    rows = [decision_row(batch=b"abc")]
    assert unspool_rows(rows) == (rows, [])
    assert spool_rows([], "t-0") == []


def test_a_hostile_topic_name_stays_in_the_directory(tmp_path: Path) -> None:
    (row,) = spool_rows([decision_row(batch=b"x")], "../../etc/passwd\x00-1", tmp_path)
    assert Path(row.spool).parent == tmp_path
    assert Path(row.spool).name.startswith(".._.._etc_passwd_-1-")


def test_a_missing_spool_fails_loudly(tmp_path: Path) -> None:
    # a task whose spool vanished must fail (Spark retries it and the stage spools again), never append b""
    (row,) = spool_rows([decision_row(batch=b"x")], "t-0", tmp_path)
    os.unlink(row.spool)
    with pytest.raises(FileNotFoundError):
        unspool_rows([row])


def test_stale_spools_are_swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (old,) = spool_rows([decision_row(batch=b"x")], "t-0", tmp_path)
    aged = time.time() - batch_spool.STALE_AFTER_S - 10
    os.utime(old.spool, (aged, aged))
    other = tmp_path / "not-a-spool.txt"
    other.write_text("kept")
    os.utime(other, (aged, aged))
    monkeypatch.setattr(batch_spool, "_last_sweep", 0.0)
    (new,) = spool_rows([decision_row(batch=b"y")], "t-0", tmp_path)
    assert not Path(old.spool).exists()
    assert Path(new.spool).exists() and other.exists()


def test_the_stage_frame_carries_no_batch_bytes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(batch_spool, "SPOOL_DIR", tmp_path)
    monkeypatch.setattr(batch_spool.spool_rows, "__defaults__", (tmp_path,))
    rows = [decision_row(batch=b"stored-bytes", base_offset=i) for i in range(3)]
    frame = stage_frame(rows, "t-0")
    assert frame["batch"].isna().all()
    assert frame["spool"].nunique() == 1 and frame["spool_offset"].tolist() == [0, 16, 32]
    back, files = unspool_rows([r._replace(spool=s, spool_offset=o, batch=None)
                                for r, s, o in zip(rows, frame["spool"], frame["spool_offset"], strict=True)])
    assert [r.batch for r in back] == [b"stored-bytes"] * 3
    remove_spools(files)
