"""Output of the `dlq` command: tables, JSON lines, and a writer that never lets a control character
reach the terminal.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO

from sinks.dlq.report import DlqStats, _terminal_text
from sinks.dlq.times import format_utc
from sinks.text_table import table_lines


def render_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], out: TextIO, max_width: int = 60) -> None:
    lines = table_lines(rows, columns, headers=[c.upper() for c in columns], max_width=max_width)
    out.write("\n".join(lines) + "\n")


def _jsonl(obj: Any, out: TextIO) -> None:
    # ASCII-only: no control character (C0, DEL, C1) from a hostile header ever reaches a terminal raw
    out.write(json.dumps(obj, ensure_ascii=True, default=str) + "\n")


class _SafeWriter:
    """Table output: topic names, request ids and messages come from producers' headers; escape every
    control character (terminal escape sequences included) except the line breaks we write."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def write(self, text: str) -> int:
        if not text.replace("\n", "").isprintable():
            text = "".join(c if c == "\n" or c.isprintable() else c.encode("unicode_escape").decode() for c in text)
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()


def _write_stats(stats: DlqStats, topic: str, fmt: str, out: TextIO) -> None:
    if fmt == "jsonl":
        _jsonl({"topic": topic, **stats.as_json()}, out)
        return
    if stats.total == 0:
        out.write(f"{topic}: no dead letters\n")
        return
    out.write(f"{topic}: {stats.total} dead letter(s), {stats.bytes} bytes, rejected from {format_utc(stats.first_ms)} "
              f"to {format_utc(stats.last_ms)}\n")
    if stats.foreign:
        out.write(f"  {stats.foreign} foreign message(s) without gw.errors.* headers\n")
    if stats.malformed:
        out.write(f"  {stats.malformed} dead letter(s) with unreadable gw.errors.* headers\n")
    if stats.replays:
        out.write(f"  {stats.replays} rejection(s) of replayed dead letters\n")
    for title, pairs in (("error", stats.by_error), ("topic", stats.by_topic), ("partition", stats.by_partition)):
        out.write("\n")
        render_table([{title: k, "count": n} for k, n in pairs], [title, "count"], out)


_LIST_COLUMNS = ("position", "rejected_at", "error_name", "target", "records", "bytes", "request_id", "client_id",
                 "principal", "message")


def _write_show(view: dict[str, Any], out: TextIO) -> None:
    err = view["error"]
    w = out.write
    w(f"dead letter {view['position']}\n")
    w(f"  rejected at   {view['rejected_at']} ({view['rejected_at_ms']})\n")
    if view["foreign"]:
        w("  FOREIGN       no gw.errors.* headers: not a dead letter of the gateway\n")
    else:
        w(f"  error         {err['name']} ({err['code']}): {err['message']}\n")
        tgt = view["target"]
        w(f"  target        topic {tgt['topic']!s}, partition {tgt['partition'] if tgt['partition'] is not None else tgt['partition_header']!s}\n")
        ing = view["ingress"]
        w(f"  ingress       {ing['topic']} {ing['partition']}:{ing['offset']}\n")
        w(f"  request id    {view['request_id']}\n  client id     {view['client_id']}\n")
        if view["principal"]:
            w(f"  principal     {view['principal']}\n")
        if view["replay_of"]:
            w(f"  replay of     {view['replay_of']}\n")
        if view["window"]:
            win = view["window"]
            w(f"  window        {win['text']} = [{win['lower']}, {win['upper']}]\n")
    for p in view["problems"]:
        w(f"  problem       {p}\n")
    w(f"  key           {view['key']}\n")
    w("headers:\n")
    for h in view["headers"]:
        w(f"  {h['key']} = {h['value']}\n")
    if err["record_errors"]:
        listed, total = len(err["record_errors"]), err["record_errors_total"]
        w("record errors:\n" if listed == total else f"record errors (the first {listed} of {total}):\n")
        for e in err["record_errors"]:
            w(f"  [{e['batch_index']}] {e['message']}\n")
    w(f"value: {view['value_bytes']} bytes\n")
    if view["batch_error"]:
        w(f"  not decodable: {view['batch_error']}\n")
        if view.get("value_preview"):
            w(f"  {view['value_preview']}\n")
        return
    b = view["batch"]
    if b is None:
        return
    w("batch: " + ", ".join(f"{k}={b[k]}" for k in (
        "magic", "timestampType", "compresscodec", "count", "baseTimestamp", "maxTimestamp", "producerId",
        "producerEpoch", "baseSequence", "isValid", "crc", "computedCrc") if k in b) + "\n")
    if b.get("recordsError"):
        w(f"  records not decodable: {b['recordsError']}\n")
    rows = []
    for r in view.get("records", []):
        rows.append({
            "offset": r.get("offset"), "timestamp": r.get("timestamp"), "utc": r.get("timestampUtc"),
            "in_window": {True: "yes", False: "NO"}.get(r.get("inWindow"), "-"),
            "key": _terminal_text(r.get("key"), r.get("keyEncoding")),
            "value": _terminal_text(r.get("value"), r.get("valueEncoding")),
            "headers": ",".join(h["key"] for h in r.get("headers", [])) or None,
            "error": r.get("recordError"),
        })
    if rows:
        w("records (offsets as sent):\n")
        render_table(rows, ["offset", "timestamp", "utc", "in_window", "key", "value", "headers", "error"], out, 80)
