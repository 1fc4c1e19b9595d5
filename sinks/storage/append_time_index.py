"""The gateway's append-time index (`<base>.appendtimeindex`) beside each Kafka segment (DESIGN §4.5).

One dense 16-byte entry per batch: `appendTime int64 | lastOffset int64` (absolute offset), big-endian,
in offset order. Append time is the gateway's monotonic per-partition clock (DESIGN §4.2), so entries are
non-decreasing in time and strictly increasing in offset. It is what keeps the wall clock of CreateTime
topics (KIP-32 option 1, KIP-870): `log_append_time` of a record = the entry of the batch holding it.
Kafka ignores the file (unknown suffix); it is never written inside Kafka's files.
"""

from __future__ import annotations

import bisect
import os
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sinks.storage.index import CorruptIndexError, InvalidOffsetError

ENTRY_SIZE = 16
_ENTRY = struct.Struct(">qq")


@dataclass(frozen=True, slots=True)
class AppendTimeEntry:
    append_time: int
    last_offset: int


class AppendTimeIndex:
    """Dense, append-only; the whole valid content is mirrored in memory (16 bytes per batch)."""

    def __init__(
        self, path: Path, writable: bool = True, valid_size: int | None = None,
        entries: Iterable[AppendTimeEntry] | None = None,
    ) -> None:
        """`entries`: an index held in memory only, never written (a reader's rebuilt view of a damaged
        file)."""
        self.path = Path(path)
        self._fd: int | None = None
        if entries is not None:
            raw = b"".join(_ENTRY.pack(e.append_time, e.last_offset) for e in entries)
        elif writable:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            length = os.fstat(self._fd).st_size
            raw = os.pread(self._fd, length if valid_size is None else min(length, valid_size), 0)
        elif self.path.exists():
            with open(self.path, "rb") as f:
                raw = f.read() if valid_size is None else f.read(valid_size)
        else:
            raw = b""
        self._length = len(raw)
        usable = len(raw) - len(raw) % ENTRY_SIZE
        self._times: list[int] = []
        self._offsets: list[int] = []
        for t, o in _ENTRY.iter_unpack(raw[:usable]):
            self._times.append(t)
            self._offsets.append(o)
        self._written = len(self._offsets)  # entries already in the file (the rest: `write_pending`)
        self._crc = zlib.crc32(raw[:usable])  # of the entries written so far (the commit record keeps it)

    @property
    def entries(self) -> int:
        return len(self._offsets)

    @property
    def size_in_bytes(self) -> int:
        return len(self._offsets) * ENTRY_SIZE

    @property
    def last_entry(self) -> AppendTimeEntry | None:
        if not self._offsets:
            return None
        return AppendTimeEntry(self._times[-1], self._offsets[-1])

    def entry(self, n: int) -> AppendTimeEntry:
        return AppendTimeEntry(self._times[n], self._offsets[n])

    def all_entries(self) -> list[AppendTimeEntry]:
        return [AppendTimeEntry(t, o) for t, o in zip(self._times, self._offsets, strict=True)]

    def append(self, append_time: int, last_offset: int) -> None:
        if self._fd is None:
            raise ValueError(f"append-time index {self.path} is not open for writing")
        if self._offsets and last_offset <= self._offsets[-1]:
            raise InvalidOffsetError(
                f"Attempt to append offset {last_offset} to the append-time index {self.path} after offset "
                f"{self._offsets[-1]}"
            )
        self._times.append(append_time)
        self._offsets.append(last_offset)

    def lookup(self, offset: int) -> int | None:
        """Append time of the batch holding `offset` (first entry whose last offset >= offset)."""
        i = bisect.bisect_left(self._offsets, offset)
        return self._times[i] if i < len(self._offsets) else None

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of batches whose last offset is >= `offset`."""
        keep = bisect.bisect_left(self._offsets, offset)
        self.truncate_to_entries(keep)

    def truncate_to_entries(self, entries: int) -> None:
        if entries < len(self._offsets):
            del self._times[entries:]
            del self._offsets[entries:]
            if entries < self._written:
                self._written = entries
                self._crc = zlib.crc32(b"".join(
                    _ENTRY.pack(t, o) for t, o in zip(self._times[:entries], self._offsets[:entries], strict=True)))
        if self._fd is not None:
            os.ftruncate(self._fd, self.size_in_bytes)

    def write_pending(self) -> None:
        """Write the entries appended since the last call to the file, in one `pwrite` (no fsync)."""
        if self._fd is not None and self._written < len(self._offsets):
            data = b"".join(
                _ENTRY.pack(t, o)
                for t, o in zip(self._times[self._written :], self._offsets[self._written :], strict=True)
            )
            os.pwrite(self._fd, data, self._written * ENTRY_SIZE)
            self._written = len(self._offsets)
            self._crc = zlib.crc32(data, self._crc)

    def checksum(self) -> int:
        """CRC-32 of the valid entries (after `write_pending`, as a commit calls it)."""
        if self._written < len(self._offsets):
            self.write_pending()
        return self._crc

    def trim_to_valid_size(self) -> None:
        self.write_pending()
        if self._fd is not None and os.fstat(self._fd).st_size != self.size_in_bytes:
            os.ftruncate(self._fd, self.size_in_bytes)

    def sanity_check(self) -> None:
        if self._length % ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"Append-time index {self.path.name} is corrupt: {self._length} bytes is not a multiple of {ENTRY_SIZE}"
            )
        for i in range(1, len(self._offsets)):
            if self._offsets[i] <= self._offsets[i - 1]:
                raise CorruptIndexError(f"Append-time index {self.path.name} has offsets out of order at entry {i}")

    def flush(self) -> None:
        self.write_pending()
        if self._fd is not None:
            os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            self.trim_to_valid_size()
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self._written = len(self._offsets)  # nothing left to write to a file about to go
        self.close()
        self.path.unlink(missing_ok=True)
