"""Kafka's transaction index (`<base>.txnindex`): the aborted transactions whose abort markers a segment holds
(Kafka's `TransactionIndex`, `AbortedTxn`, `TxnIndexSearchResult`).

Each entry is 34 bytes, big-endian: `version int16 (0) | producerId int64 | firstOffset int64 |
lastOffset int64 | lastStableOffset int64`, appended in strictly increasing `lastOffset` order. The file
is not created until the first entry (unlike the offset and time indexes); a segment
without aborted transactions has none. A READ_COMMITTED fetch asks each segment from the fetch offset on
for the entries overlapping `[fetchOffset, upperBound)` (`collect_aborted`), until one entry's last stable
offset reaches the upper bound: no transaction in a later segment can then have started in the range.

Kafka's own rules, and where this module is stricter:
- `append`: `lastOffset` must increase (Kafka's message); Kafka only remembers the last offset it
  appended itself, so after a reopen it would accept any entry — here the file's last entry counts too;
- `truncate_to(offset)`: cut the file at the first entry whose `lastOffset >= offset`;
- `sanity_check`: every entry's `lastOffset >= startOffset` (the segment's base offset).
Kafka's reader stops before a partial trailing entry, and rejects only a version above 0 — read from the
field's first byte alone — with a `KafkaException` that fails the log load rather than rebuild the index.
Here a length that is not a multiple of 34, a version field other than 0 and last offsets out of order
are a `CorruptIndexError` naming the file, from every read and append: only a torn or foreign write
makes them, and recovery can always rebuild the index from the log (`reset`, then appends).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from storage.errors import KafkaStorageError
from storage.file_names import TXN_INDEX_FILE_SUFFIX, segment_file_name
from storage.index import CorruptIndexError, InvalidOffsetError

CURRENT_VERSION = 0
TOTAL_SIZE = 34
_ENTRY = struct.Struct(">hqqqq")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction: its producer, its first and last offsets (the abort marker's offset is
    `last_offset`), and the partition's last stable offset when it was aborted (Kafka's `AbortedTxn`)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def __post_init__(self) -> None:
        for name in ("producer_id", "first_offset", "last_offset", "last_stable_offset"):
            value = getattr(self, name)
            if not isinstance(value, int) or not _INT64_MIN <= value <= _INT64_MAX:
                raise ValueError(f"AbortedTxn {name} must be an int64, got {value!r}")

    def encode(self) -> bytes:
        return _ENTRY.pack(CURRENT_VERSION, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> AbortedTxn:
        """The entry at `offset` of `data`; `ValueError` for fewer than 34 bytes or a version other than 0."""
        if len(data) - offset < TOTAL_SIZE:
            raise ValueError(f"An aborted transaction is {TOTAL_SIZE} bytes, found {max(len(data) - offset, 0)}")
        version, producer_id, first, last, stable = _ENTRY.unpack_from(data, offset)
        if version != CURRENT_VERSION:
            raise ValueError(f"Unexpected aborted transaction version {version}, current version is {CURRENT_VERSION}")
        return cls(producer_id, first, last, stable)

    def __str__(self) -> str:  # Kafka's `toString`, as its messages quote an entry
        return (f"AbortedTxn(version={CURRENT_VERSION}, producerId={self.producer_id}, firstOffset={self.first_offset}, "
                f"lastOffset={self.last_offset}, lastStableOffset={self.last_stable_offset})")


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    """The aborted transactions overlapping a fetch range, and whether no later segment can hold more
    (Kafka's `TxnIndexSearchResult`)."""

    aborted_transactions: tuple[AbortedTxn, ...]
    is_complete: bool


class TransactionIndex:
    """`<base>.txnindex` of the segment starting at `start_offset` (Kafka's `TransactionIndex`).

    Reads go to the file each time (a segment's index is a few entries, read once per READ_COMMITTED fetch
    that reaches it); the file is opened for writing at the first append, truncation or reset."""

    @classmethod
    def of_segment(cls, directory: Path, base_offset: int) -> TransactionIndex:
        """The `.txnindex` of the segment at `base_offset` in a partition directory (it may not exist)."""
        return cls(Path(directory) / segment_file_name(base_offset, TXN_INDEX_FILE_SUFFIX), base_offset)

    def __init__(self, path: Path, start_offset: int) -> None:
        self.path = Path(path)
        self.start_offset = start_offset
        self._fd: int | None = None
        self._last_offset: int | None = None
        self._last_offset_known = False  # read from the file at the first append

    # ------------------------------------------------------------------ writing

    def append(self, txn: AbortedTxn) -> None:
        """Kafka's `append`: `txn.last_offset` must be greater than the last entry's."""
        fd = self._writable()
        if not self._last_offset_known:
            entries = self._read_entries()
            self._last_offset = entries[-1].last_offset if entries else None
            self._last_offset_known = True
        if self._last_offset is not None and self._last_offset >= txn.last_offset:
            raise InvalidOffsetError(
                f"The last offset of appended transactions must increase sequentially, but {txn.last_offset} is "
                f"not greater than current last offset {self._last_offset} of index {self.path.absolute()}"
            )
        data = txn.encode()
        written = 0
        while written < len(data):  # O_APPEND: each write lands at the end
            written += os.write(fd, data[written:])
        self._last_offset = txn.last_offset

    def flush(self) -> None:
        """fsync the file, when it is open for writing (Kafka's `force(true)`)."""
        if self._fd is not None:
            os.fsync(self._fd)

    def reset(self) -> None:
        """Remove every entry, keeping the (empty) file (Kafka's `reset`, before recovery re-appends them)."""
        if self._fd is None and not self.path.exists():
            self._last_offset, self._last_offset_known = None, True
            return
        os.ftruncate(self._writable(), 0)
        self._last_offset, self._last_offset_known = None, True

    def truncate_to(self, offset: int) -> None:
        """Kafka's `truncateTo`: drop the first entry whose `last_offset >= offset` and every one after it."""
        entries = self._read_entries()
        for n, txn in enumerate(entries):
            if txn.last_offset >= offset:
                os.ftruncate(self._writable(), n * TOTAL_SIZE)
                self._last_offset = entries[n - 1].last_offset if n else None
                self._last_offset_known = True
                return

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._last_offset_known = False

    def delete(self) -> bool:
        """Close and remove the file; whether it existed (Kafka's `deleteIfExists`)."""
        self.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    # ------------------------------------------------------------------ reading

    def all_aborted(self) -> list[AbortedTxn]:
        """Every entry, in file order (Kafka's `allAbortedTxns`)."""
        return self._read_entries()

    def is_empty(self) -> bool:
        return not self._read_entries()

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Kafka's `collectAbortedTxns`: the entries overlapping `[fetch_offset, upper_bound_offset)` (last
        offset >= fetch offset, first offset < upper bound), complete at the first entry whose last stable
        offset is >= the upper bound (the entries after it are not looked at)."""
        found: list[AbortedTxn] = []
        for txn in self._read_entries():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(tuple(found), True)
        return TxnIndexSearchResult(tuple(found), False)

    def sanity_check(self) -> None:
        """Kafka's `sanityCheck`: no entry's last offset below the start offset; a damaged file (see the
        module) fails it too. Both raise `CorruptIndexError`: rebuild the index."""
        for txn in self._read_entries():
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"Last offset of aborted transaction {txn} in index {self.path.absolute()} is less than "
                    f"start offset {self.start_offset}"
                )

    # ------------------------------------------------------------------ helpers

    def _writable(self) -> int:
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            except OSError as e:
                raise KafkaStorageError(f"Failed to open the transaction index {self.path.absolute()}: {e}") from e
        return self._fd

    def _read(self) -> bytes:
        try:
            if self._fd is not None:
                return os.pread(self._fd, os.fstat(self._fd).st_size, 0)
            with open(self.path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return b""  # not created until the first entry
        except OSError as e:
            raise KafkaStorageError(f"Failed to read from the transaction index {self.path.absolute()}: {e}") from e

    def _read_entries(self) -> list[AbortedTxn]:
        data = self._read()
        if len(data) % TOTAL_SIZE != 0:
            raise CorruptIndexError(
                f"Transaction index file {self.path.name} is corrupt, found {len(data)} bytes which is not a "
                f"multiple of {TOTAL_SIZE}."
            )
        entries: list[AbortedTxn] = []
        for version, producer_id, first, last, stable in _ENTRY.iter_unpack(data):
            if version != CURRENT_VERSION:
                raise CorruptIndexError(
                    f"Unexpected aborted transaction version {version} in transaction index {self.path.absolute()}, "
                    f"current version is {CURRENT_VERSION}"
                )
            if entries and last <= entries[-1].last_offset:
                # Beyond Kafka's check: `append` keeps last offsets increasing; a file that does not is
                # not one it wrote.
                raise CorruptIndexError(
                    f"Transaction index file {self.path.name} has entries out of order: last offset {last} after "
                    f"{entries[-1].last_offset} (entry {len(entries)})"
                )
            entries.append(AbortedTxn(producer_id, first, last, stable))
        return entries

    def __enter__(self) -> TransactionIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def close_all(indexes: list[TransactionIndex], sync: bool) -> None:
    """Indexes written since a commit made durable (`sync`; a group commit's syncfs does it) and closed, before the
    commit record that covers them; the list emptied."""
    for index in indexes:
        if sync:
            index.flush()
        index.close()
    indexes.clear()
