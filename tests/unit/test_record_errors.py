"""Record errors bounded (`contract.record_errors`): a rejected batch of 200 000 bad records — one
INVALID_TIMESTAMP record error each, ~170 B of JSON apiece, 34 MB in all — still gets a produce response
and a dead letter that fit the response and dead-letter topics (`IngressLimits.dead_letter_message_bytes`,
librdkafka's message.max.bytes for the sink's producer), with the first record errors in batch order, the
total, and a note that the list is cut. The batch goes through the real stage decision and the sink's own
builders, so the contract is tested, not a copy. No Kafka, no Spark."""

from __future__ import annotations

import io
import json

import pytest

from contract.dead_letters import DeadLetterField as F
from contract.limits import DEAD_LETTER_HEADERS_BYTES, RECORD_ERRORS_MAX_BYTES, IngressLimits
from contract.record_errors import bound_record_errors
from contract.responses import decode_response, encode_response
from sinks.batch_metrics import aggregate_decisions
from sinks.dlq.dead_letters import dead_letter
from sinks.dlq.format import DlqMessage, parse_dead_letter
from sinks.dlq.render import _write_show
from sinks.dlq.report import show_view
from sinks.responses import response_from_row
from streaming.stage import IngressBatch, decide_group
from validators.append_result import PartitionState
from validators.codec.compression import CompressionType
from validators.codec.record_batch import build_record_batch
from validators.topic_config import TopicConfig, TopicRegistry

NOW = 1_700_000_000_000
BAD_RECORDS = 200_000
BEFORE_MS = 60_000


def librdkafka_size(key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]] | None) -> int:
    """What librdkafka holds against message.max.bytes in produce() (key, value and headers, uncompressed)."""
    return len(key or b"") + len(value or b"") + sum(len(k) + len(v) for k, v in headers or ())


@pytest.fixture(scope="module")
def rejected_row():
    """The stage's decision for one zstd batch of BAD_RECORDS tiny records, all before the window."""
    batch = build_record_batch([(NOW - 10 * BEFORE_MS, None, b"")] * BAD_RECORDS, compression=CompressionType.ZSTD)
    registry = TopicRegistry({"t": TopicConfig(name="t", partitions=1, message_timestamp_before_max_ms=BEFORE_MS)})
    item = IngressBatch(3, 77, NOW, batch, "req-many", "many-client", 1, "0")
    (row,), _ = decide_group("t", 0, [item], registry, PartitionState(), NOW)
    return row


def test_the_list_is_bounded_in_batch_order_and_reads_as_json_dumps_would_write_it() -> None:
    errors = [(i, f"message {i}") for i in range(10)]
    whole = bound_record_errors(errors, len(errors))
    assert whole.json == json.dumps([{"batch_index": i, "message": m} for i, m in errors])
    assert (whole.kept, whole.total, whole.truncated) == (10, 10, False)
    assert whole.error_message("Kafka's text") == "Kafka's text"
    size = len(whole.json)
    for budget in (size, size - 1, 2, 40):
        cut = bound_record_errors(errors, len(errors), max_bytes=budget)
        assert len(cut.json) <= budget and json.loads(cut.json) == json.loads(whole.json)[: cut.kept]
    assert bound_record_errors(errors, 10, max_bytes=size - 1).kept == 9
    assert bound_record_errors(errors, 10, max_bytes=2).json == "[]"
    assert bound_record_errors([], 0).json == "[]"
    # non-ASCII messages: escaped, so the JSON's length is its size in bytes
    wide = bound_record_errors([(0, "é" * 10)], 1)
    assert len(wide.json.encode()) == len(wide.json)


def test_a_batch_of_200_000_record_errors_gets_a_decision_row_within_the_bound(rejected_row) -> None:
    row = rejected_row
    assert (row.error_name, row.record_error_count) == ("INVALID_TIMESTAMP", BAD_RECORDS)
    listed = json.loads(row.record_errors)
    assert 5_000 < len(listed) < BAD_RECORDS and len(row.record_errors) <= RECORD_ERRORS_MAX_BYTES
    assert [e["batch_index"] for e in listed] == list(range(len(listed)))  # the first ones, in batch order
    assert listed[0]["message"].startswith(f"Timestamp {NOW - 10 * BEFORE_MS} of message with offset 0 is out of range")
    assert row.error_message == (
        f"One or more records have been rejected due to invalid timestamp (record errors: the first {len(listed)} of "
        f"{BAD_RECORDS} are listed; the gateway carries at most {RECORD_ERRORS_MAX_BYTES} bytes of them)")
    # the metric counts every record error, not the listed ones
    assert sum(g["record_errors"] for g in aggregate_decisions([row], {"t": 1})) == BAD_RECORDS


def test_its_response_fits_the_response_topic(rejected_row) -> None:
    encoded = encode_response(response_from_row(rejected_row))
    assert librdkafka_size(rejected_row.request_id.encode(), encoded, None) <= IngressLimits().dead_letter_message_bytes
    response = decode_response(encoded)
    assert response["error_code"] == 32 and response["error_message"] == rejected_row.error_message
    assert response["record_errors"] == json.loads(rejected_row.record_errors)
    assert f"of {BAD_RECORDS} are listed" in response["error_message"]


def test_its_dead_letter_fits_the_dead_letter_topic_and_keeps_the_batch(rejected_row) -> None:
    letter = dead_letter(rejected_row, "gateway.ingress")
    assert letter.value == rejected_row.batch  # the original bytes, unchanged
    headers = dict(letter.headers)
    assert headers[F.RECORD_ERRORS_TOTAL.header] == str(BAD_RECORDS).encode()
    assert headers[F.RECORD_ERRORS.header] == rejected_row.record_errors.encode()
    assert sum(len(k) + len(v) for k, v in letter.headers) <= DEAD_LETTER_HEADERS_BYTES
    # the largest batch a dead letter may carry, with these headers, still fits
    limits = IngressLimits()
    assert librdkafka_size(letter.key, b"\0" * limits.batch_bytes, letter.headers) <= limits.dead_letter_message_bytes


def test_the_dlq_command_reads_a_cut_list(rejected_row) -> None:
    letter = dead_letter(rejected_row, "gateway.ingress")
    dl = parse_dead_letter(DlqMessage(0, 5, letter.timestamp_ms, letter.key, letter.value, tuple(letter.headers)))
    listed = len(json.loads(rejected_row.record_errors))
    assert dl.problems == () and (len(dl.record_errors), dl.record_error_count) == (listed, BAD_RECORDS)
    assert dl.record_errors_truncated and dl.record_errors[0].batch_index == 0
    out = io.StringIO()
    _write_show(show_view(dl), out)  # what `dlq show` prints
    assert f"record errors (the first {listed} of {BAD_RECORDS}):\n" in out.getvalue()


def test_dead_letters_without_the_total_read_as_before(rejected_row) -> None:
    """Dead letters written before `record.errors.total`: the list's length; a bad total is a problem."""
    letter = dead_letter(rejected_row._replace(record_errors='[{"batch_index": 2, "message": "m"}]', record_error_count=1),
                         "gateway.ingress")
    older = tuple((k, v) for k, v in letter.headers if k != F.RECORD_ERRORS_TOTAL.header)
    dl = parse_dead_letter(DlqMessage(0, 1, letter.timestamp_ms, letter.key, letter.value, older))
    assert dl.problems == () and dl.record_error_count == 1 and not dl.record_errors_truncated
    broken = older + ((F.RECORD_ERRORS_TOTAL.header, b"zero"),)
    dl = parse_dead_letter(DlqMessage(0, 1, letter.timestamp_ms, letter.key, letter.value, broken))
    assert dl.record_error_count == 1 and any(F.RECORD_ERRORS_TOTAL.header in p for p in dl.problems)
