"""Plain-text tables for the operator commands (`segments`, `dlq`, `status`): one renderer, so every
command lays out columns the same way — two spaces apart, nulls as "-", long cells cut with "…"."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any


def _cell(value: Any, max_width: int | None) -> str:
    text = "-" if value is None else str(value).replace("\n", " ")
    if max_width is not None and len(text) > max_width:
        return text[: max_width - 1] + "…"
    return text


def table_lines(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None, *, headers: Sequence[str] | None = None,
    right: Collection[str] = (), max_width: int | None = None,
) -> list[str]:
    """The header line and one line per row. `columns`: the keys shown (default: the first row's);
    `headers`: their titles (default: the keys); `right`: columns aligned right (numbers)."""
    if columns is None:
        columns = list(rows[0]) if rows else []
    titles = list(headers) if headers is not None else list(columns)
    cells = [[_cell(row.get(c), max_width) for c in columns] for row in rows]
    widths = [max([len(t)] + [len(r[i]) for r in cells]) for i, t in enumerate(titles)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if c in right else v.ljust(w) for c, v, w in zip(columns, values, widths, strict=True)
        ).rstrip()

    return [line(titles), *(line(r) for r in cells)]
