"""The dlq command's pure part: reading dead letters, filters, stats, the show view, replay planning,
time parsing, output. Dead letters are built exactly as the gateway's sink builds them
(`sinks.dlq.dead_letters.dead_letter` over a stage output row), so the contract is tested, not a copy."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest

from contract.dead_letters import DeadLetterField
from contract.ingress import HEADER_REPLAY_OF
from contract.topics import DEFAULT_INGRESS_TOPIC
from sinks.dlq.cli import EXIT_USAGE, main
from sinks.dlq.dead_letters import dead_letter
from sinks.dlq.format import DlqMessage, parse_dead_letter
from sinks.dlq.render import render_table
from sinks.dlq.replay import plan_replay
from sinks.dlq.report import Filter, compute_stats, list_row, show_view
from sinks.dlq.times import format_utc, parse_position
from sinks.time_arguments import parse_time, protect_relative_times
from tests.decision_rows import decision_row
from validators.codec.compression import CompressionType
from validators.codec.record_batch import build_record_batch

NOW = 1_714_564_800_000  # 2024-05-01T12:00:00Z


def row(**overrides):
    base = dict(
        error_code=32, error_name="INVALID_TIMESTAMP",
        error_message="One or more records have been rejected due to invalid timestamp",
        record_errors=json.dumps([{"batch_index": 1, "message": "Timestamp 1 of message with offset 1 is out of range."}]),
        topic="ct", partition=0, partition_header="0", ingress_partition=1, ingress_offset=42,
        request_id="req-1", client_id="client-a", batch_time_ms=NOW, replay_of=None, principal="User:alice",
        window=f"[{NOW - 86_400_000}, {NOW + 3_600_000}]",
        batch=build_record_batch([(NOW, b"k0", b"v0"), (1, b"\xff\x00", b"v1", [("h", b"x")])]),
    )
    base.update(overrides)
    return decision_row(**base)


def as_dlq_message(r, partition: int = 0, offset: int = 7) -> DlqMessage:
    if r.error_code != 32:
        r = r._replace(window=None)
    out = dead_letter(r, "gateway.ingress")
    return DlqMessage(partition, offset, out.timestamp_ms, out.key, out.value, tuple(out.headers))


def test_reads_the_sinks_dead_letter_headers() -> None:
    dl = parse_dead_letter(as_dlq_message(row()))
    assert not dl.foreign and dl.problems == ()
    assert (dl.error_code, dl.error_name) == (32, "INVALID_TIMESTAMP")
    assert dl.error_message.startswith("One or more records")
    assert [(e.batch_index, e.message) for e in dl.record_errors] == [(1, "Timestamp 1 of message with offset 1 is out of range.")]
    assert (dl.topic, dl.partition, dl.target) == ("ct", 0, "ct-0")
    assert (dl.ingress_topic, dl.ingress_partition, dl.ingress_offset) == ("gateway.ingress", 1, 42)
    assert (dl.request_id, dl.client_id, dl.principal) == ("req-1", "client-a", "User:alice")
    assert dl.window == (NOW - 86_400_000, NOW + 3_600_000)
    assert dl.rejected_at_ms == NOW and dl.position == "0:7" and not dl.is_replay


def test_missing_and_malformed_target_headers() -> None:
    dl = parse_dead_letter(as_dlq_message(row(error_code=3, error_name="UNKNOWN_TOPIC_OR_PARTITION", topic="ct",
                                              partition=None, partition_header="zero", record_errors="[]")))
    assert dl.partition is None and dl.partition_text == "zero" and dl.target == "ct-zero"
    assert dl.window is None  # only timestamp errors carry the window
    dl = parse_dead_letter(as_dlq_message(row(error_code=17, error_name="INVALID_TOPIC_EXCEPTION", topic=None,
                                              partition=None, partition_header=None, record_errors="[]")))
    assert dl.topic is None and dl.target == "-"


def test_foreign_and_broken_messages_are_reported_not_raised() -> None:
    foreign = parse_dead_letter(DlqMessage(0, 1, NOW, None, b"\x00garbage", (("some", b"header"),)))
    assert foreign.foreign and foreign.problems and foreign.error_code is None
    broken = parse_dead_letter(DlqMessage(0, 2, NOW, b"k", b"", (
        ("gw.errors.code", b"abc"), ("gw.errors.record.errors", b"{not json"), ("gw.errors.window", b"[1, x]"),
        ("gw.errors.ingress.partition", b"\xff\xfe"),
    )))
    assert not broken.foreign
    assert len(broken.problems) >= 5  # code, name, record.errors, window, ingress.partition, ingress.offset
    assert broken.error_code is None and broken.window is None
    # the views never raise on them
    for dl in (foreign, broken):
        assert list_row(dl)["position"]
        assert show_view(dl)["batch_error"]


def test_filter_by_error_topic_partition_time_request_id_and_position() -> None:
    a = parse_dead_letter(as_dlq_message(row(), 0, 1))
    b = parse_dead_letter(as_dlq_message(row(error_code=3, error_name="UNKNOWN_TOPIC_OR_PARTITION", topic="nope",
                                             partition=1, partition_header="1", record_errors="[]",
                                             request_id="req-2", batch_time_ms=NOW + 1000), 1, 5))
    foreign = parse_dead_letter(DlqMessage(0, 9, NOW, None, b"x", ()))
    every = [a, b, foreign]

    def sel(**kw):
        return [d.position for d in every if Filter(**kw).matches(d)]

    assert sel() == ["0:1", "1:5", "0:9"]  # no filter: foreign ones are listed too
    assert sel(error_names=frozenset({"INVALID_TIMESTAMP"})) == ["0:1"]
    assert sel(error_names=frozenset({"3"})) == ["1:5"]  # by code
    assert sel(topics=frozenset({"nope"})) == ["1:5"]
    assert sel(partitions=frozenset({0})) == ["0:1"]
    assert sel(since_ms=NOW + 1) == ["1:5"]
    assert sel(until_ms=NOW + 1000) == ["0:1", "0:9"]  # until is exclusive
    assert sel(request_ids=frozenset({"req-2"})) == ["1:5"]
    assert sel(positions=frozenset({(0, 9)})) == ["0:9"]
    assert sel(principals=frozenset({"User:alice"})) == ["0:1", "1:5"]
    assert sel(principals=frozenset({"User:bob"})) == []


def test_stats_count_by_error_topic_partition_and_time_range() -> None:
    letters = [parse_dead_letter(as_dlq_message(row(batch_time_ms=NOW + i), 0, i)) for i in range(3)]
    letters.append(parse_dead_letter(as_dlq_message(row(error_code=3, error_name="UNKNOWN_TOPIC_OR_PARTITION",
                                                        partition=1, record_errors="[]", batch_time_ms=NOW - 5), 0, 3)))
    letters.append(parse_dead_letter(DlqMessage(0, 4, NOW + 10, None, b"junk", ())))
    letters.append(parse_dead_letter(as_dlq_message(row(request_id="replay:gateway.dlq:0:1:req-1"), 0, 5)))
    stats = compute_stats(letters)
    assert stats.total == 6 and stats.foreign == 1 and stats.replays == 1
    assert dict(stats.by_error) == {"INVALID_TIMESTAMP": 4, "UNKNOWN_TOPIC_OR_PARTITION": 1, "(foreign)": 1}
    assert dict(stats.by_topic) == {"ct": 5}
    assert dict(stats.by_partition) == {"ct-0": 4, "ct-1": 1}
    assert (stats.first_ms, stats.last_ms) == (NOW - 5, NOW + 10)
    assert stats.by_error[0] == ("INVALID_TIMESTAMP", 4)  # most frequent first
    empty = compute_stats([])
    assert empty.total == 0 and empty.first_ms is None and empty.as_json()["by_error"] == {}


def test_show_decodes_records_with_dates_hex_window_and_record_errors() -> None:
    view = show_view(parse_dead_letter(as_dlq_message(row())))
    assert view["rejected_at"] == "2024-05-01T12:00:00.000Z"
    assert view["window"]["lower"] == "2024-04-30T12:00:00.000Z" and view["window"]["upper"] == "2024-05-01T13:00:00.000Z"
    assert view["error"]["name"] == "INVALID_TIMESTAMP"
    r0, r1 = view["records"]
    assert (r0["offset"], r0["timestamp"], r0["timestampUtc"], r0["key"], r0["value"]) == (
        0, NOW, "2024-05-01T12:00:00.000Z", "k0", "v0")
    assert r0["inWindow"] is True and r0["recordError"] is None
    assert (r1["offset"], r1["timestamp"], r1["timestampUtc"]) == (1, 1, "1970-01-01T00:00:00.001Z")
    assert (r1["key"], r1["keyEncoding"]) == ("ff00", "hex")
    assert r1["inWindow"] is False and r1["recordError"].startswith("Timestamp 1 ")
    assert r1["headers"] == [{"key": "h", "value": "x", "valueEncoding": "utf-8"}]
    assert view["batch"]["isValid"] is True and view["batch"]["count"] == 2
    assert any(h["key"] == "gw.errors.window" for h in view["headers"])
    # table rendering shows the same things
    out = io.StringIO()
    from sinks.dlq.render import _write_show

    _write_show(view, out)
    text = out.getvalue()
    assert "INVALID_TIMESTAMP (32)" in text and "0xff00" in text and "2024-04-30T12:00:00.000Z" in text
    # control characters never reach the terminal raw, even when they are valid UTF-8
    raw = parse_dead_letter(as_dlq_message(row(batch=build_record_batch([(NOW, b"k", b"\x00\x1b[2Jx")]),
                                               record_errors="[]", window=None, error_code=3)))
    out = io.StringIO()
    _write_show(show_view(raw), out)
    assert "\x1b" not in out.getvalue() and "0x001b5b324a78" in out.getvalue()
    unlimited = parse_dead_letter(as_dlq_message(row(window=f"[{NOW - 9_223_372_036_854_775_807}, {NOW + 1}]")))
    assert show_view(unlimited)["window"]["lower"] == "unbounded"
    assert "[1] Timestamp 1 of message" in text


def test_show_compressed_and_undecodable_values() -> None:
    compressed = build_record_batch([(NOW, None, b"z" * 100)], compression=CompressionType.ZSTD)
    view = show_view(parse_dead_letter(as_dlq_message(row(batch=compressed, record_errors="[]"))))
    assert view["batch"]["compresscodec"] == "zstd" and view["records"][0]["value"] == "z" * 100
    assert view["records"][0]["key"] is None
    garbage = show_view(parse_dead_letter(as_dlq_message(row(batch=b"\x00garbage", record_errors="[]"))))
    assert garbage["batch"] is None and garbage["batch_error"] and garbage["value_preview"] == "0x" + b"\x00garbage".hex()
    bad_crc = bytearray(build_record_batch([(NOW, b"k", b"v")]))
    bad_crc[-1] ^= 0xFF
    view = show_view(parse_dead_letter(as_dlq_message(row(batch=bytes(bad_crc), record_errors="[]"))))
    assert view["batch"]["isValid"] is False and view["batch"]["crc"] != view["batch"]["computedCrc"]


def test_replay_plan_keeps_value_retargets_and_tags() -> None:
    dl = parse_dead_letter(as_dlq_message(row(), 0, 7))
    plan = plan_replay(dl, "gateway.dlq")
    assert plan.refused is None and plan.ingress_topic == "gateway.ingress"
    assert (plan.target_topic, plan.target_partition, plan.key) == ("ct", 0, b"ct/0")
    assert plan.request_id == "replay:gateway.dlq:0:7:req-1"
    headers = dict(plan.headers("gateway.dlq"))
    assert headers == {"gw.topic": b"ct", "gw.partition": b"0", "gw.request.id": b"replay:gateway.dlq:0:7:req-1",
                       HEADER_REPLAY_OF: b"gateway.dlq:0:7", "gw.client.id": b"client-a",
                       "gw.principal": b"User:alice"}  # who produced it originally
    moved = plan_replay(dl, "gateway.dlq", ingress_topic="other.ingress", to_topic="ct", to_partition=1)
    assert (moved.ingress_topic, moved.target_partition, moved.key) == ("other.ingress", 1, b"ct/1")


def test_a_replay_without_an_ingress_header_goes_to_the_default_ingress_topic() -> None:
    message = as_dlq_message(row())
    dl = parse_dead_letter(dataclasses.replace(message, headers=tuple(
        (name, value) for name, value in message.headers if name != DeadLetterField.INGRESS_TOPIC.header)))
    assert dl.ingress_topic is None
    assert plan_replay(dl, "ops.dead").ingress_topic == DEFAULT_INGRESS_TOPIC
    assert plan_replay(dl, "ops.dead", default_ingress_topic="ops.in").ingress_topic == "ops.in"  # the config's
    assert plan_replay(dl, "ops.dead", "chosen", default_ingress_topic="ops.in").ingress_topic == "chosen"


def test_replay_refuses_replays_foreign_and_targetless_dead_letters() -> None:
    # the gateway's dead letter of a rejected replay carries the replay request id: refused (no loop)
    again = parse_dead_letter(as_dlq_message(row(request_id="replay:gateway.dlq:0:7:req-1"), 0, 8))
    assert again.replay_of == "gateway.dlq:0:7"
    assert "already a replay" in plan_replay(again, "gateway.dlq").refused
    # ... or a replay tag header, should the gateway copy it
    tagged = as_dlq_message(row(), 0, 9)
    tagged = DlqMessage(0, 9, tagged.timestamp_ms, tagged.key, tagged.value, tagged.headers + ((HEADER_REPLAY_OF, b"x:0:1"),))
    assert "already a replay" in plan_replay(parse_dead_letter(tagged), "gateway.dlq").refused
    foreign = parse_dead_letter(DlqMessage(0, 1, NOW, None, b"x", ()))
    assert "not a dead letter" in plan_replay(foreign, "gateway.dlq").refused
    no_topic = parse_dead_letter(as_dlq_message(row(topic=None, partition=None, partition_header=None)))
    assert "--to-topic" in plan_replay(no_topic, "gateway.dlq").refused
    assert "--to-partition" in plan_replay(no_topic, "gateway.dlq", to_topic="ct").refused
    assert plan_replay(no_topic, "gateway.dlq", to_topic="ct", to_partition=1).refused is None
    bad_partition = parse_dead_letter(as_dlq_message(row(partition=None, partition_header="zero")))
    assert "'zero'" in plan_replay(bad_partition, "gateway.dlq").refused


def test_time_and_position_parsing() -> None:
    assert parse_time("1714564800000") == NOW
    assert parse_time("2024-05-01T12:00:00Z") == NOW
    assert parse_time("2024-05-01T12:00:00") == NOW  # naive means UTC
    assert parse_time("2024-05-01T14:00:00+02:00") == NOW
    assert parse_time("-2h", now_ms=NOW) == NOW - 7_200_000
    assert parse_time("-15m", now_ms=NOW) == NOW - 900_000
    assert parse_time("-7d", now_ms=NOW) == NOW - 7 * 86_400_000
    with pytest.raises(ValueError, match="cannot read time"):
        parse_time("yesterday")
    assert parse_position("2:17") == (2, 17)
    with pytest.raises(ValueError):
        parse_position("2-17")
    assert format_utc(-1) == "none" and format_utc(9_223_372_036_854_775_807) == "out of range"
    assert format_utc(0) == "1970-01-01T00:00:00.000Z"


def test_table_rendering_truncates_and_aligns() -> None:
    out = io.StringIO()
    render_table([{"a": "x" * 100, "b": None}, {"a": "y", "b": 3}], ["a", "b"], out, max_width=10)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["A", "B"]
    assert lines[1].startswith("x" * 9 + "…") and lines[1].endswith("-")
    assert lines[2].split() == ["y", "3"]


def test_usage_errors_exit_2_without_touching_kafka() -> None:
    err = io.StringIO()
    assert main(["replay", "--bootstrap-servers", "127.0.0.1:1"], io.StringIO(), err) == EXIT_USAGE
    assert "--all" in err.getvalue()
    err = io.StringIO()
    assert main(["show", "--bootstrap-servers", "127.0.0.1:1"], io.StringIO(), err) == EXIT_USAGE
    assert main(["list", "--since", "whenever", "--bootstrap-servers", "127.0.0.1:1"], io.StringIO(),
                io.StringIO()) == EXIT_USAGE
    assert main(["bogus"], io.StringIO(), io.StringIO()) == EXIT_USAGE


def test_relative_times_are_accepted_after_since_and_until() -> None:
    from sinks.dlq.cli import build_parser

    argv = protect_relative_times(["list", "--since", "-2h", "--until", "-5m", "--error", "INVALID_TIMESTAMP"])
    args = build_parser().parse_args(argv)
    assert (args.since, args.until, args.error) == ("-2h", "-5m", ["INVALID_TIMESTAMP"])


def test_hostile_header_text_is_escaped_in_tables_and_json() -> None:
    from sinks.dlq.render import _jsonl, _SafeWriter

    out = io.StringIO()
    _SafeWriter(out).write("topic \x1b[31mred\x9b\n")
    assert out.getvalue() == "topic \\x1b[31mred\\x9b\n"
    out = io.StringIO()
    _jsonl({"t": "a\x9bb\x1b"}, out)
    assert "\x9b" not in out.getvalue() and "\x1b" not in out.getvalue() and json.loads(out.getvalue()) == {"t": "a\x9bb\x1b"}


def test_a_rejected_replay_carries_replay_of_and_is_never_replayed_again() -> None:
    """The gateway copies the ingress `gw.replay.of` header into the dead letter, so a replayed
    batch that is rejected again cannot be replayed in a loop, whatever its request id."""
    dl = parse_dead_letter(as_dlq_message(row(replay_of="gateway.dlq:0:7", request_id="client-chosen")))
    assert dl.replay_of == "gateway.dlq:0:7"
    assert dl.is_replay
    refused = plan_replay(dl, "gateway.dlq").refused
    assert refused is not None and "already a replay" in refused


def test_show_raw_writes_the_batch_bytes_unchanged(tmp_path, monkeypatch) -> None:
    """`dlq show --raw FILE`: the dead letter's value, byte for byte, is what `validators decide` reads."""
    import sinks.dlq.cli as cli

    dl = parse_dead_letter(as_dlq_message(row(), partition=0, offset=7))

    class Reader:
        is_empty = False

        def __init__(self, *_args) -> None:
            pass

        def __enter__(self):
            return self

        def __exit__(self, *_exc) -> None:
            return None

    monkeypatch.setattr(cli, "DlqReader", Reader)
    monkeypatch.setattr(cli, "read_dead_letters", lambda _reader, flt: iter([dl] if (0, 7) in flt.positions else []))
    out, err = io.StringIO(), io.StringIO()
    raw = tmp_path / "batch.bin"
    assert main(["show", "0:7", "--raw", str(raw), "--bootstrap-servers", "127.0.0.1:1"], out, err) == 0
    assert raw.read_bytes() == dl.message.value
    assert f"wrote the batch's {len(dl.message.value)} bytes to {raw}" in err.getvalue()
    assert "INVALID_TIMESTAMP" in out.getvalue()  # the view is printed as without --raw
    assert main(["show", "0:8", "--raw", str(tmp_path / "none.bin"), "--bootstrap-servers", "127.0.0.1:1"],
                io.StringIO(), io.StringIO()) == 3
    assert not (tmp_path / "none.bin").exists()
    err = io.StringIO()
    assert main(["show", "0:7", "--raw", str(tmp_path / "no-dir" / "b.bin"), "--bootstrap-servers", "127.0.0.1:1"],
                io.StringIO(), err) == EXIT_USAGE
    assert err.getvalue().startswith("dlq: cannot write")
