"""The batch spool between the stage and the sink's task (`sinks.batch_spool`): bytes come back exactly,
rows not spooled pass through, hostile topic names stay inside the spool directory, files are removed
by the task and stale ones swept; and the stage's emitted frame carries no batch bytes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sinks import batch_spool
from sinks.batch_spool import Unspooler, remove_spools, spool_rows, unspool_rows
from streaming.stage import stage_frame
from tests.decision_rows import decision_row
from validators.codec.record_batch import RECORD_BATCH_OVERHEAD, build_record_batch


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
    monkeypatch.setattr(batch_spool.spool_batches, "__defaults__", (tmp_path,))
    rows = [decision_row(batch=b"stored-bytes", base_offset=i) for i in range(3)]
    frame = stage_frame(rows, "t-0")
    assert frame["batch"].isna().all()
    assert frame["spool"].nunique() == 1 and Path(frame["spool"][0]).parent == tmp_path
    assert frame["spool_offset"].tolist() == [0, 12, 24] and frame["spool_length"].tolist() == [12, 12, 12]
    back, files = unspool_rows([r._replace(spool=s, spool_offset=o, spool_length=n, batch=None)
                                for r, s, o, n in zip(rows, frame["spool"], frame["spool_offset"],
                                                      frame["spool_length"], strict=True)])
    assert [r.batch for r in back] == [b"stored-bytes"] * 3
    remove_spools(files)


def test_batches_lie_back_to_back_and_come_back_as_spans(tmp_path: Path) -> None:
    # the spool holds the batches contiguously: the sink copies a run of accepted batches in one kernel call
    batches = [build_record_batch([(1000 + i, None, b"v" * (10 * i + 1))]) for i in range(3)]
    spooled = spool_rows([decision_row(batch=b, base_offset=i) for i, b in enumerate(batches)], "t-0", tmp_path)
    assert Path(spooled[0].spool).read_bytes() == b"".join(batches)
    assert [r.batch_size for r in spooled] == [len(b) for b in batches]
    with Unspooler() as unspooler:
        spans = [unspooler.span(r) for r in spooled]
        assert [s.read() for s in spans] == batches
        assert [s.head for s in spans] == [b[:RECORD_BATCH_OVERHEAD] for b in batches]
        assert [s.offset for s in spans] == [0, len(batches[0]), len(batches[0]) + len(batches[1])]
        assert unspooler.paths == [Path(spooled[0].spool)]
        with pytest.raises(ValueError, match="not spooled"):
            unspooler.span(decision_row(batch=b"x"))


def test_a_spool_of_empty_batches_reads_back(tmp_path: Path) -> None:
    # an empty file cannot be mapped: rows of zero bytes (idempotent duplicates store nothing) still read back
    rows = spool_rows([decision_row(batch=b""), decision_row(batch=None)], "t-0", tmp_path)
    back, files = unspool_rows(rows)
    assert [r.batch for r in back] == [b"", b""]
    remove_spools(files)


def test_a_truncated_spool_fails_loudly(tmp_path: Path) -> None:
    (row,) = spool_rows([decision_row(batch=b"x" * 100)], "t-0", tmp_path)
    os.truncate(row.spool, 50)
    with pytest.raises(EOFError, match="ends before"):
        unspool_rows([row])
    with Unspooler() as unspooler, pytest.raises(EOFError, match="ends before"):
        unspooler.span(row)
