"""The index file mechanics shared by the offset and time indexes (Kafka's `AbstractIndex`, Kafka's `OffsetIndex`, `TimeIndex`).

Not memory-mapped: the valid entries live in a `bytearray` mirror (lookups). New entries are written
to the file behind the mirror, in one `pwrite` per `write_pending` (the segment calls it before a
commit, a flush or a close): readers only trust what a commit record covers. The active segment's index
has Kafka's capacity, `floor(segment.index.bytes / entry)` entries (`max_entries`: an index full rolls the
segment), but its file holds only the entries written: Kafka preallocates the file because it maps it into
memory, and trims it on roll and close, so without the mapping the file is at every commit what Kafka's is
once trimmed, with no `ftruncate` to preallocate and trim again. A pre-existing file is taken as valid up to
its length rounded down to the entry size (a preallocated, zero-filled tail included), and `sanity_check`
decides a rebuild at load.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

from storage.errors import KafkaStorageError

if TYPE_CHECKING:
    from storage.file_records import Write

INT32_MAX = 2**31 - 1


class CorruptIndexError(KafkaStorageError):
    """Kafka's `CorruptIndexException`: the sanity check failed, the index must be rebuilt."""


class InvalidOffsetError(ValueError):
    """Kafka's `InvalidOffsetException`: an append out of offset order."""


class IndexFullError(ValueError):
    """Kafka's `IllegalArgumentException("Attempt to append to a full index (size = n).")`."""


class IndexOffsetOverflowError(ValueError):
    """Kafka's `IndexOffsetOverflowException`: offset - base does not fit an int32."""


# A group commit writes an active segment's new index entries to the file once they fill this many bytes; until
# then its commit record carries them (`SegmentState.*_tail`, docs/design.md, "Index entries in the record").
INDEX_TAIL_LIMIT = 256


def round_down_to_exact_multiple(number: int, factor: int) -> int:
    return factor * (number // factor)


class AbstractIndex:
    """One index file: `entries` valid fixed-size entries, room for `max_entries` (Kafka's `OffsetIndex`, `TimeIndex`)."""

    entry_size = 0
    index_kind = "index"

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_size: int = -1,
        writable: bool = True,
        valid_size: int | None = None,
        in_memory: bool = False,
        tail: bytes = b"",
    ) -> None:
        """`in_memory`: an empty index that never touches its file (a reader's rebuilt view of a damaged
        index, `segment_recovery.rebuild_indexes_in_memory`). `tail`: the last of the `valid_size` bytes, which the
        commit record carries and the file does not hold yet (`SegmentState.index_tail`)."""
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.writable = writable
        self.in_memory = in_memory
        self._fd: int | None = None
        self._crc = (0, 0)  # (bytes of `_data` hashed, their CRC-32): `checksum` extends it
        newly_created = False
        if in_memory:
            self._length = round_down_to_exact_multiple(max(max_index_size, 0), self.entry_size)
            self._data = bytearray()
            self._entries = self._written = self._file_size = 0
            self._dirty = False
            return
        if writable:
            newly_created = not self.path.exists()
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if newly_created and max_index_size < self.entry_size:
                raise ValueError(f"Invalid max index size: {max_index_size}")
            length = os.fstat(self._fd).st_size
        else:
            length = self.path.stat().st_size if self.path.exists() else 0
        self._file_size = length  # the file's own length: the capacity (`_length`) is not allocated
        in_file = None if valid_size is None else valid_size - len(tail)  # the committed bytes the file holds
        if in_file is not None:
            length = min(length, in_file)
        self._length = length if not newly_created else round_down_to_exact_multiple(max_index_size, self.entry_size)
        # A new index starts empty; a pre-existing one is assumed valid up to its (rounded) length.
        valid = 0 if newly_created else round_down_to_exact_multiple(length, self.entry_size)
        if valid:
            if self._fd is not None:
                self._data = bytearray(os.pread(self._fd, valid, 0))
            else:
                with open(self.path, "rb") as f:
                    self._data = bytearray(f.read(valid))
            valid = round_down_to_exact_multiple(len(self._data), self.entry_size)
            del self._data[valid:]
        else:
            self._data = bytearray()
        self._written = len(self._data)  # bytes of `_data` already in the file
        if tail and self._written == in_file:  # the file holds the committed prefix: the record's tail follows it
            self._data += tail
            self._length = max(self._length, len(self._data))
        self._entries = len(self._data) // self.entry_size
        self._dirty = False  # written since the last flush

    # ------------------------------------------------------------------ size

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._length // self.entry_size

    @property
    def length(self) -> int:
        """Capacity in bytes: the length Kafka gives the file (preallocated, or trimmed to the entries)."""
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """Bytes of valid entries (what the file is trimmed to)."""
        return self._entries * self.entry_size

    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    def resize(self, new_size: int) -> bool:
        """Kafka's `resize`: the capacity set to `floor(new_size / entry)` entries, keeping the valid ones.
        The file is cut only where it is longer than that (an older preallocated file, entries truncated);
        it is never extended. Returns whether the capacity changed."""
        rounded = round_down_to_exact_multiple(new_size, self.entry_size)
        rounded = max(rounded, self.size_in_bytes)
        if rounded == self._length:
            return False
        self._require_writable()
        self._length = rounded
        self._cut_file(rounded)
        return True

    def trim_to_valid_size(self) -> None:
        """The capacity, and the file, cut to the valid entries: done on roll and close."""
        if self.writable:
            self.write_pending()
            self.resize(self.size_in_bytes)
            self._cut_file(self.size_in_bytes)

    def cut_file_to_entries(self) -> None:
        """The file cut to the entries written to it, its capacity kept (a commit of the active segment)."""
        if self.writable and self._file_size > self._written:
            self._cut_file(self._written)

    @property
    def tail(self) -> bytes:
        """The valid entries not in the file yet (what a group commit's record carries)."""
        return bytes(self._data[self._written:])

    def write_due(self, into: list[Write]) -> None:
        """A group commit's `write_pending`: only once the entries not in the file fill `INDEX_TAIL_LIMIT` bytes."""
        if len(self._data) - self._written >= INDEX_TAIL_LIMIT:
            self.write_pending(into)

    def _cut_file(self, size: int) -> None:
        if self._fd is not None and self._file_size > size:
            os.ftruncate(self._fd, size)
            self._file_size = size
            self._dirty = True

    def write_pending(self, into: list[Write] | None = None) -> None:
        """Write the entries appended since the last call to the file (no fsync); `into`: the write added to it
        instead (`LogSegment.write_pending`)."""
        if self._fd is not None and self._written < len(self._data):
            if into is not None:
                into.append((self._fd, (self._data[self._written :],), self._written))
            else:
                os.pwrite(self._fd, self._data[self._written :], self._written)
            self._written = len(self._data)
            self._file_size = max(self._file_size, self._written)
            self._dirty = True

    def flush(self) -> None:
        """fsync, when anything was written since the last flush."""
        self.write_pending()
        if self._fd is not None and self._dirty:
            os.fdatasync(self._fd)
            self._dirty = False

    def close(self, trim: bool = True) -> None:
        if self._fd is not None:
            self.write_pending()
            if trim:
                self.trim_to_valid_size()
            os.close(self._fd)
            self._fd = None

    def close_handler(self) -> None:
        """Kafka's `closeHandler`: the descriptor closed, nothing written or cut."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self._written = len(self._data)  # nothing left to write to a file about to go
        self.close(trim=False)
        self.path.unlink(missing_ok=True)

    def checksum(self) -> int:
        """CRC-32 of the valid entries: what the commit record keeps for the active segment, whose indexes
        are not fsynced at commit. Incremental: only entries added since the last call are hashed."""
        done, crc = self._crc
        if done > len(self._data):  # entries were dropped since: hash again from the start
            done, crc = 0, 0
        if done < len(self._data):
            crc = zlib.crc32(self._data[done:], crc)
            self._crc = (len(self._data), crc)
        return crc

    # ------------------------------------------------------------------ truncation

    def truncate(self) -> None:
        """Remove every entry (Kafka's `truncate()`)."""
        self.truncate_to_entries(0)

    def truncate_to_entries(self, entries: int) -> None:
        if entries >= self._entries:
            return
        self._entries = entries
        del self._data[entries * self.entry_size :]
        self._crc = (0, 0)  # entries written after the cut could make up the same length again
        self._written = min(self._written, len(self._data))
        self._cut_file(self.size_in_bytes)  # the dropped entries off the disk too

    def truncate_to(self, offset: int) -> None:
        """Kafka's `truncateTo(offset)`: drop every entry whose offset is >= `offset`."""
        slot = self._largest_lower_bound_slot(offset - self.base_offset, by_key=False)
        if slot < 0:
            new_entries = 0
        elif self._relative_offset(slot) == offset - self.base_offset:
            new_entries = slot
        else:
            new_entries = slot + 1
        self.truncate_to_entries(new_entries)

    # ------------------------------------------------------------------ helpers for subclasses

    def _require_writable(self) -> None:
        if self._fd is None and not self.in_memory:
            raise ValueError(f"{self.index_kind} {self.path} is not open for writing")

    def _relative(self, offset: int) -> int:
        relative = offset - self.base_offset
        if relative < 0 or relative > INT32_MAX:
            raise IndexOffsetOverflowError(f"Integer overflow for offset: {offset} ({self.path})")
        return relative

    def _write_entry(self, entry: bytes) -> None:
        self._require_writable()
        position = self.size_in_bytes
        if position + self.entry_size > self._length:
            # A trimmed (inactive) index written again: grow it by one entry.
            self._length = position + self.entry_size
        self._data += entry
        self._entries += 1

    def _key(self, slot: int) -> int:  # what lookups search by
        raise NotImplementedError

    def _relative_offset(self, slot: int) -> int:
        raise NotImplementedError

    def _largest_lower_bound_slot(self, target: int, by_key: bool) -> int:
        """Greatest slot whose key (or relative offset) is <= target; -1 when none (Kafka's
        `largestLowerBoundSlotFor`)."""
        get = self._key if by_key else self._relative_offset
        lo, hi = 0, self._entries - 1
        if hi < 0 or get(0) > target:
            return -1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if get(mid) <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def __enter__(self) -> AbstractIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
