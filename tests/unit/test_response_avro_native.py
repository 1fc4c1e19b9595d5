"""The C produce-response encoder (`sinks/_response_avro.c`) against its reference, fastavro behind
`contract.responses.encode_response`: identical bytes for generated decision rows (every field at its
edges: nulls, unicode, int32/int64 bounds, record error lists) and for the stage's own rows; the
fallback when the module is missing; bad values raise, as fastavro raises, instead of writing bytes."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contract.responses import SINGLE_OBJECT_MARKER, decode_response, encode_response, schema_fingerprint
from sinks import responses
from sinks.responses import NATIVE_RESPONSES, encode_row_response, response_from_row
from tests.decision_rows import decision_row

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(max_size=40)
OPT_TEXT = st.none() | TEXT
RECORD_ERRORS = st.lists(st.fixed_dictionaries({"batch_index": INT32, "message": OPT_TEXT}), max_size=5)

ROWS = st.builds(
    lambda **kw: decision_row(**{**kw, "record_errors": json.dumps(kw["record_errors"])}),
    request_id=TEXT, client_id=OPT_TEXT, topic=OPT_TEXT, partition=st.none() | INT32, error_code=INT32,
    error_name=OPT_TEXT, error_message=OPT_TEXT, base_offset=INT64, log_append_time_ms=INT64,
    log_start_offset=INT64, record_errors=RECORD_ERRORS, record_count=INT32, ingress_partition=INT32,
    ingress_offset=INT64,
)

def test_the_native_encoder_is_built() -> None:
    # `make setup` builds it (pyproject's ext-modules): the tests below compare it with fastavro
    assert NATIVE_RESPONSES is not None


@settings(max_examples=400, deadline=None)
@given(row=ROWS, log_start=st.none() | INT64)
def test_native_bytes_equal_fastavro(row, log_start) -> None:
    native = encode_row_response(row, log_start)
    assert native == encode_response(response_from_row(row, log_start))
    decoded = decode_response(native)
    assert decoded["request_id"] == row.request_id
    assert decoded["log_start_offset"] == (row.log_start_offset if log_start is None else log_start)


def test_edge_rows() -> None:
    long_errors = json.dumps([{"batch_index": i, "message": "é" * 300} for i in range(50)])  # grows past 512 B
    for row in (
        decision_row(),
        decision_row(partition=None, topic=None, request_id=""),
        decision_row(record_errors=long_errors, error_code=87, error_name="INVALID_RECORD", error_message="x" * 5000),
        decision_row(request_id="\U0001f600 \u0000 nul", client_id="\u00ff"),
        decision_row(base_offset=2**63 - 1, log_append_time_ms=-(2**63), ingress_offset=0),
    ):
        assert encode_row_response(row) == encode_response(response_from_row(row))
    assert encode_row_response(decision_row()).startswith(SINGLE_OBJECT_MARKER + schema_fingerprint())


@pytest.mark.parametrize("bad", [
    {"request_id": "\ud800"},  # a lone surrogate is not UTF-8
    {"base_offset": 2**63},  # beyond Avro's long
])
def test_bad_values_raise_like_fastavro(bad) -> None:
    row = decision_row(**bad)
    with pytest.raises((ValueError, OverflowError, UnicodeEncodeError)):
        encode_response(response_from_row(row))
    with pytest.raises((ValueError, OverflowError, UnicodeEncodeError)):
        encode_row_response(row)


def test_without_the_native_module_fastavro_encodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(responses, "NATIVE_RESPONSES", None)
    row = decision_row(record_errors=json.dumps([{"batch_index": 3, "message": "bad"}]), error_code=87)
    assert encode_row_response(row, 7) == encode_response(response_from_row(row, 7))
    assert decode_response(encode_row_response(row, 7))["record_errors"] == [{"batch_index": 3, "message": "bad"}]
