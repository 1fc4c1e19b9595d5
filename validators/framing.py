"""Step 5 of the decision (Kafka's produce path (`UnifiedLog.append`)): `ProduceRequest.validateRecords` over
`ByteBufferLogInputStream` — exactly one complete batch per partition, its size and magic sane.
"""

from __future__ import annotations

import struct

from validators.append_result import (
    Rejected,
)
from validators.codec.record_batch import (
    LOG_OVERHEAD,
    RECORD_OVERHEAD_V0,
)
from validators.errors import Errors

# The produce request version whose texts the gateway speaks (Kafka 4.1+ clients send v13).
PRODUCE_VERSION = 13
HEADER_UP_TO_MAGIC = 17  # offset + size + leader epoch + magic
_SIZE_AT_8 = struct.Struct(">i")


def next_batch_size(data: bytes, pos: int) -> tuple[int, int] | Rejected | None:
    """`ByteBufferLogInputStream.nextBatchSize` + `nextBatch`: (size, magic), a CORRUPT_MESSAGE, or
    None when no complete batch starts at `pos`."""
    remaining = len(data) - pos
    if remaining < LOG_OVERHEAD:
        return None
    size = _SIZE_AT_8.unpack_from(data, pos + 8)[0]
    if size < RECORD_OVERHEAD_V0:
        return Rejected(
            Errors.CORRUPT_MESSAGE,
            f"Record size {size} is less than the minimum record overhead ({RECORD_OVERHEAD_V0})",
        )
    if remaining < HEADER_UP_TO_MAGIC:
        return None
    magic = struct.unpack_from(">b", data, pos + 16)[0]
    if magic < 0 or magic > 2:
        return Rejected(Errors.CORRUPT_MESSAGE, f"Invalid magic found in record: {magic}")
    if remaining < size + LOG_OVERHEAD:
        return None
    return size + LOG_OVERHEAD, magic


def incomplete_input(data: bytes) -> str | None:
    """Why `data` holds no complete batch, for a person reading a file (a cut-off download, a short read),
    or None when it does. The decision itself answers such bytes as Kafka does (`frame_batch`: INVALID_RECORD,
    "must have at least one record batch"), which names neither the cause nor the sizes."""
    if not data:
        return "no bytes: expected one produce batch (RecordBatch v2 or a legacy message set)"
    if len(data) < LOG_OVERHEAD:
        return f"truncated: {len(data)} bytes, fewer than a batch's {LOG_OVERHEAD}-byte offset and size fields"
    if next_batch_size(data, 0) is not None:
        return None  # complete, or framing Kafka rejects with its own clear text (size, magic)
    size = _SIZE_AT_8.unpack_from(data, 8)[0]
    return f"truncated: the batch's size field says {size + LOG_OVERHEAD} bytes, {len(data)} present"


def frame_batch(data: bytes) -> tuple[int, int] | Rejected:
    first = next_batch_size(data, 0)
    if first is None:
        return Rejected(
            Errors.INVALID_RECORD,
            f"Produce requests with version {PRODUCE_VERSION} must have at least one record batch per partition",
        )
    if isinstance(first, Rejected) or first[1] < 2:
        return first  # legacy message sets are framed by legacy_records (several entries are legal)
    second = next_batch_size(data, first[0])
    if isinstance(second, Rejected):
        return second
    if second is not None:
        return Rejected(
            Errors.INVALID_RECORD,
            f"Produce requests with version {PRODUCE_VERSION} are only allowed to contain exactly one record "
            "batch per partition",
        )
    return first
