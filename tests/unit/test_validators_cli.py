"""`python -m validators decide|dump`, run as a subprocess with real batch bytes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

REPO = Path(__file__).resolve().parents[2]
NOW = 1_700_000_000_000


def batch(stamps: list[int], *, producer: tuple[int, int, int] | None = None) -> bytes:
    b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    if producer:
        b.set_producer_state(*producer, False)
    for i, ts in enumerate(stamps):
        b.append(i, timestamp=ts, key=b"k%d" % i, value=b"value", headers=[])
    return bytes(b.build())


def run(args: list[str], data: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "validators", *args], input=data, capture_output=True, cwd=REPO, timeout=60, check=False
    )


def decide(data: bytes, *args: str) -> dict:
    p = run(["decide", "--now", str(NOW), *args], data)
    assert p.returncode in (0, 1), p.stderr.decode()
    out = json.loads(p.stdout.decode().strip().splitlines()[-1])
    assert p.returncode == (0 if out["error_code"] == 0 else 1)  # 0 accepted, 1 rejected
    return out


def test_accepted_create_time() -> None:
    out = decide(batch([NOW - 5, NOW - 1]), "--log-end-offset", "41")
    assert out["error_code"] == 0 and out["error_name"] is None and out["error_message"] is None
    assert out["record_errors"] == []
    assert (out["base_offset"], out["last_offset"], out["record_count"]) == (41, 42, 2)
    assert out["log_append_time_ms"] == -1 and out["max_timestamp"] == NOW - 1
    assert out["state"]["log_end_offset"] == 43 and out["state"]["last_append_time_ms"] == NOW


def test_rejected_timestamps() -> None:
    out = decide(batch([NOW, NOW - 5000]), "--config", '{"message.timestamp.before.max.ms": "1000"}')
    assert (out["error_code"], out["error_name"]) == (32, "INVALID_TIMESTAMP")
    assert out["error_message"] == "One or more records have been rejected due to invalid timestamp"
    assert out["record_errors"] == [{
        "batch_index": 1,
        "message": f"Timestamp {NOW - 5000} of message with offset 1 is out of range. "
                   f"The timestamp should be within [{NOW - 1000}, {NOW + 3600000}]",
    }]
    assert (out["base_offset"], out["log_append_time_ms"], out["max_timestamp"], out["record_count"]) == (-1, -1, -1, 0)
    assert out["window"] == [NOW - 1000, NOW + 3600000]


def test_log_append_time_with_a_held_clock_and_the_stored_bytes(tmp_path: Path) -> None:
    stored = tmp_path / "stored.bin"
    out = decide(batch([1234]), "--config", '{"message.timestamp.type": "LogAppendTime"}',
                 "--last-append-time", str(NOW + 50), "--out", str(stored))
    assert out["log_append_time_ms"] == NOW + 50 == out["max_timestamp"] and out["clock_held"] is True
    b = DefaultRecordBatch(stored.read_bytes())
    assert b.validate_crc() and b.timestamp_type == 1 and b.max_timestamp == NOW + 50 and b.first_timestamp == 1234


def test_topic_and_partition_errors() -> None:
    data = batch([NOW])
    out = decide(data, "--topic", "no such topic")
    assert out["error_name"] == "INVALID_TOPIC_EXCEPTION" and out["error_code"] == 17
    assert out["error_message"] == ("Topic name is invalid: 'no such topic' contains one or more characters other "
                                    "than ASCII alphanumerics, '.', '_' and '-'")
    out = decide(data, "--partition", "5", "--partitions", "3")
    assert (out["error_code"], out["error_name"]) == (3, "UNKNOWN_TOPIC_OR_PARTITION")
    out = decide(data, "--topic", "__transaction_state")
    assert out["error_message"] == "Cannot append to internal topic __transaction_state"


def test_corrupt_batch() -> None:
    data = bytearray(batch([NOW]))
    data[-1] ^= 0xFF
    out = decide(bytes(data))
    assert (out["error_code"], out["error_name"]) == (2, "CORRUPT_MESSAGE")
    assert out["error_message"].startswith("Record is corrupt (stored crc = ")


def test_idempotent_duplicate_through_the_producer_state_argument() -> None:
    data = batch([NOW], producer=(9, 0, 0))
    first = decide(data)
    state = first["state"]
    again = decide(data, "--producers", state["producers"], "--log-end-offset", str(state["log_end_offset"]))
    assert again["duplicate"] is True and again["base_offset"] == first["base_offset"] == 0
    gap = decide(batch([NOW], producer=(9, 0, 5)), "--producers", state["producers"], "--log-end-offset", "1")
    assert gap["error_name"] == "OUT_OF_ORDER_SEQUENCE_NUMBER"


def test_registry_file(tmp_path: Path) -> None:
    reg = tmp_path / "topics.json"
    reg.write_text(json.dumps({"topics": {"orders": {"partitions": 2, "configs": {"message.timestamp.type": "LogAppendTime"}}}}))
    out = decide(batch([1]), "--registry", str(reg), "--topic", "orders", "--partition", "1")
    assert out["log_append_time_ms"] == NOW
    out = decide(batch([1]), "--registry", str(reg), "--topic", "payments")
    assert out["error_name"] == "UNKNOWN_TOPIC_OR_PARTITION"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--config", '{"message.timestamp.type": "Now"}'],
         "Invalid value Now for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"),
        (["--config", "[1]"], "must be JSON objects"),
        (["--config", "{"], "must be JSON objects"),
        (["--producers", "{"], "producer state is not valid JSON"),
    ],
)
def test_bad_arguments_exit_2(args: list[str], fragment: str) -> None:
    p = run(["decide", "--now", str(NOW), *args], batch([NOW]))
    assert p.returncode == 2 and p.stdout == b""
    assert fragment in p.stderr.decode()


def test_dump() -> None:
    data = batch([NOW, NOW + 3])
    p = run(["dump"], data)
    assert p.returncode == 0, p.stderr.decode()
    doc = json.loads(p.stdout.decode().strip().splitlines()[-1])
    assert doc["magic"] == 2 and doc["maxTimestamp"] == NOW + 3 and len(doc["records"]) == 2
    p = run(["dump", "--all"], data + data)
    assert p.returncode == 0 and len(json.loads(p.stdout.decode())) == 2
    p = run(["dump"], b"\x00" * 5)
    assert p.returncode == 1 and p.stderr.decode().startswith("error:")


def test_exit_status_accepted_rejected_invalid() -> None:
    assert run(["decide", "--now", str(NOW)], batch([NOW])).returncode == 0
    rejected = run(["decide", "--now", str(NOW), "--config", '{"message.timestamp.after.max.ms": "0"}'],
                   batch([NOW + 5]))
    assert rejected.returncode == 1 and json.loads(rejected.stdout)["error_name"] == "INVALID_TIMESTAMP"
    assert run(["decide", "--now", str(NOW), "--config", "{"], batch([NOW])).returncode == 2
    assert "exit status: 0 accepted; 1 rejected" in " ".join(run(["decide", "--help"], b"").stdout.decode().split())


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "error: stdin: no bytes: expected one produce batch (RecordBatch v2 or a legacy message set)"),
        (b"\x00" * 5, "error: stdin: truncated: 5 bytes, fewer than a batch's 12-byte offset and size fields"),
        (batch([NOW])[:-1], "error: stdin: truncated: the batch's size field says {n} bytes, {m} present"),
    ],
)
def test_a_truncated_batch_is_named_truncated(data: bytes, message: str) -> None:
    """The decision keeps Kafka's INVALID_RECORD text (tests/unit/test_log_validator.py); the command says why."""
    full = len(batch([NOW]))
    p = run(["decide", "--now", str(NOW)], data)
    assert p.returncode == 2 and p.stdout == b""
    assert p.stderr.decode().strip() == message.format(n=full, m=full - 1)
    assert "Traceback" not in p.stderr.decode()
