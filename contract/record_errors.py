"""The record errors (KIP-467: `batch_index`, `message`) of a rejected batch as the gateway carries them:
a JSON list in the decision row (`DecisionRow.record_errors`), the dead letter's `gw.errors.record.errors`
header and the produce response's `record_errors` — bounded to `RECORD_ERRORS_MAX_BYTES`, so a batch of
millions of bad records still gets a response and a dead letter its topics take (docs/design.md: the query: bad input never
stops the query). Kafka's ProduceResponse carries every record error; the gateway keeps the first ones in
batch order and says how many there were (`DecisionRow.record_error_count`, the dead letter's
`gw.errors.record.errors.total`, and a note in the error message).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from contract.limits import RECORD_ERRORS_MAX_BYTES

_SEPARATOR = ", "  # json.dumps' item separator: the bounded list reads as json.dumps(list) would write it


@dataclass(frozen=True)
class BoundedRecordErrors:
    json: str  # JSON list of {batch_index, message}, at most RECORD_ERRORS_MAX_BYTES (ASCII: bytes = chars)
    kept: int  # how many the list holds: the first ones in batch order
    total: int  # how many the batch had

    @property
    def truncated(self) -> bool:
        return self.kept < self.total

    def error_message(self, message: str) -> str:
        """The rejection's message, with a note when the list is cut (the response's `error_message` and the
        dead letter's `gw.errors.message`: the one place a response can say so without a schema change)."""
        if not self.truncated:
            return message
        return (f"{message} (record errors: the first {self.kept} of {self.total} are listed; the gateway "
                f"carries at most {RECORD_ERRORS_MAX_BYTES} bytes of them)")


def bound_record_errors(
    errors: Iterable[tuple[int, str | None]], total: int, max_bytes: int = RECORD_ERRORS_MAX_BYTES
) -> BoundedRecordErrors:
    """The first of `errors` (batch_index, message), in the order given — batch order, as Kafka's
    LogValidator and the gateway's record walks report them — whose JSON fits `max_bytes`. `total` is how
    many `errors` holds; only the kept ones are encoded, so a batch of millions costs a few thousand."""
    pieces: list[str] = []
    size = 2  # "[" and "]"
    for batch_index, message in errors:
        piece = json.dumps({"batch_index": batch_index, "message": message})  # ensure_ascii: len() is bytes
        grown = size + len(piece) + (len(_SEPARATOR) if pieces else 0)
        if grown > max_bytes:
            break
        pieces.append(piece)
        size = grown
    return BoundedRecordErrors("[" + _SEPARATOR.join(pieces) + "]", len(pieces), total)
