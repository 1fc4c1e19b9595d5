"""The gateway's append-time index (`<base>.appendtimeindex`) beside each Kafka segment (docs/design.md: segment storage).

One dense 16-byte entry per batch: `appendTime int64 | lastOffset int64` (absolute offset), big-endian,
in offset order. Append time is the gateway's monotonic per-partition clock (docs/design.md: what the stage decides), so entries are
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
from typing import TYPE_CHECKING

from storage.index import INDEX_TAIL_LIMIT, CorruptIndexError, InvalidOffsetError

if TYPE_CHECKING:
    from storage.file_records import Write

ENTRY_SIZE = 16
_ENTRY = struct.Struct(">qq")
_OFFSET = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class AppendTimeEntry:
    append_time: int
    last_offset: int


class _Offsets:
    """The entries' last offsets as a read-only sequence over the packed bytes (what `bisect` searches)."""

    __slots__ = ("_buf",)

    def __init__(self, buf: bytearray) -> None:
        self._buf = buf

    def __len__(self) -> int:
        return len(self._buf) // ENTRY_SIZE

    def __getitem__(self, i: int) -> int:
        return _OFFSET.unpack_from(self._buf, i * ENTRY_SIZE + 8)[0]


class AppendTimeIndex:
    """Dense, append-only; entries are kept packed, as in the file (16 bytes per batch, no object each).

    A writer reopening the committed active segment with the commit record's CRC of the valid bytes
    (`committed_crc`) does not read them: the file is made durable with the log at every commit, so its committed
    prefix and the record's tail (the entries a group commit has not written yet) are what that CRC describes,
    and readers check it (`segment_reader`). Appending needs only the count and the last offset; lookups and
    truncation below the prefix read it when first asked. Without this a micro-batch's open cost grows with the
    active segment (one entry per batch, up to a segment of 1 GiB)."""

    def __init__(
        self, path: Path, writable: bool = True, valid_size: int | None = None,
        entries: Iterable[AppendTimeEntry] | None = None, committed_crc: int | None = None, tail: bytes = b"",
    ) -> None:
        """`entries`: an index held in memory only, never written (a reader's rebuilt view of a damaged
        file). `tail`: the last of the `valid_size` bytes, which the commit record carries and the file does not
        hold yet (`SegmentState.append_time_index_tail`)."""
        self.path = Path(path)
        self._fd: int | None = None
        self._head = 0  # entries at the front that are in the file only (`_load` reads them)
        self._file_size = 0  # a writer's file length, kept so that a commit's trim asks nothing of the file
        raw = b""
        in_file = None if valid_size is None else valid_size - len(tail)  # the committed bytes the file holds
        whole = False  # the file holds all of them: the record's tail follows
        if entries is not None:
            raw = b"".join(_ENTRY.pack(e.append_time, e.last_offset) for e in entries)
        elif writable:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            length = self._file_size = os.fstat(self._fd).st_size
            whole = in_file is not None and length >= in_file
            if committed_crc is not None and in_file is not None and in_file % ENTRY_SIZE == 0 and whole:
                self._head = in_file // ENTRY_SIZE
            else:
                raw = os.pread(self._fd, length if in_file is None else min(length, in_file), 0)
        elif self.path.exists():
            whole = in_file is not None and self.path.stat().st_size >= in_file
            if in_file is not None and in_file % ENTRY_SIZE == 0 and whole:
                self._head = in_file // ENTRY_SIZE  # a reader's committed entries: read when first asked
            else:
                with open(self.path, "rb") as f:
                    raw = f.read() if in_file is None else f.read(in_file)
        usable = len(raw) - len(raw) % ENTRY_SIZE
        self._buf = bytearray(raw[:usable])
        self._written = self.entries  # entries already in the file (the rest: `write_pending`)
        if tail and whole:
            self._buf += tail
        self._length = self._head * ENTRY_SIZE + len(raw) + (len(tail) if tail and whole else 0)
        # CRC-32 of the first `_crc_entries` entries (the commit record keeps all valid ones'); None: not computed
        self._crc: int | None = None
        self._crc_entries = 0
        self._last_offset: int | None = None  # what `append` continues (a writer's only)
        if self._head and self._fd is not None:
            self._crc, self._crc_entries = committed_crc, self.entries
            self._last_offset = (self._offset_at(self.entries - 1) if self._buf else
                                 _ENTRY.unpack(os.pread(self._fd, ENTRY_SIZE, (self._head - 1) * ENTRY_SIZE))[1])
        elif not self._head:
            self._crc, self._crc_entries = zlib.crc32(self._buf), self.entries
            self._last_offset = self._offset_at(self.entries - 1) if self._buf else None

    def _load(self) -> None:
        """Read the committed prefix not held yet (see the class docstring)."""
        if self._head:
            if self._fd is not None:
                data = os.pread(self._fd, self._head * ENTRY_SIZE, 0)
            else:
                with open(self.path, "rb") as f:
                    data = f.read(self._head * ENTRY_SIZE)
            if len(data) != self._head * ENTRY_SIZE:
                raise CorruptIndexError(
                    f"Append-time index {self.path.name} is corrupt: {len(data)} bytes where the commit record "
                    f"has {self._head * ENTRY_SIZE}"
                )
            self._buf[:0] = data
            self._head = 0

    def _offset_at(self, n: int) -> int:
        return _OFFSET.unpack_from(self._buf, (n - self._head) * ENTRY_SIZE + 8)[0]

    @property
    def entries(self) -> int:
        return self._head + len(self._buf) // ENTRY_SIZE

    @property
    def size_in_bytes(self) -> int:
        return self.entries * ENTRY_SIZE

    @property
    def last_entry(self) -> AppendTimeEntry | None:
        n = self.entries
        return self.entry(n - 1) if n else None

    def entry(self, n: int) -> AppendTimeEntry:
        if n < self._head:
            self._load()
        return AppendTimeEntry(*_ENTRY.unpack_from(self._buf, (n - self._head) * ENTRY_SIZE))

    def all_entries(self) -> list[AppendTimeEntry]:
        self._load()
        return [AppendTimeEntry(t, o) for t, o in _ENTRY.iter_unpack(self._buf)]

    def append(self, append_time: int, last_offset: int) -> None:
        if self._fd is None:
            raise ValueError(f"append-time index {self.path} is not open for writing")
        if self._last_offset is not None and last_offset <= self._last_offset:
            raise InvalidOffsetError(
                f"Attempt to append offset {last_offset} to the append-time index {self.path} after offset "
                f"{self._last_offset}"
            )
        self._buf += _ENTRY.pack(append_time, last_offset)
        self._last_offset = last_offset

    def lookup(self, offset: int) -> int | None:
        """Append time of the batch holding `offset` (first entry whose last offset >= offset)."""
        self._load()
        i = bisect.bisect_left(_Offsets(self._buf), offset)
        return _ENTRY.unpack_from(self._buf, i * ENTRY_SIZE)[0] if i < self.entries else None

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of batches whose last offset is >= `offset`."""
        self._load()
        self.truncate_to_entries(bisect.bisect_left(_Offsets(self._buf), offset))

    def truncate_to_entries(self, entries: int) -> None:
        if entries < self.entries:
            if entries < self._head:
                self._load()
            del self._buf[(entries - self._head) * ENTRY_SIZE:]
            self._written = min(self._written, entries)
            if self._crc is not None and self._crc_entries > entries:
                self._load()
                self._crc, self._crc_entries = zlib.crc32(self._buf), entries
            self._last_offset = self._offset_at(entries - 1) if entries else None
        self.cut_file_to_entries()

    def write_pending(self, into: list[Write] | None = None) -> None:
        """Write the entries appended since the last call to the file, in one `pwrite` (no fsync); `into`: the
        write added to it instead (`LogSegment.write_pending`)."""
        if self._fd is not None and self._written < self.entries:
            data = bytes(self._buf[(self._written - self._head) * ENTRY_SIZE:])
            if into is not None:
                into.append((self._fd, (data,), self._written * ENTRY_SIZE))
            else:
                os.pwrite(self._fd, data, self._written * ENTRY_SIZE)
            self._written = self.entries
            self._file_size = max(self._file_size, self._written * ENTRY_SIZE)

    @property
    def tail(self) -> bytes:
        """The valid entries not in the file yet (what a group commit's record carries)."""
        return bytes(self._buf[(self._written - self._head) * ENTRY_SIZE:])

    def write_due(self, into: list[Write]) -> None:
        """A group commit's `write_pending`: only once the entries not in the file fill `INDEX_TAIL_LIMIT` bytes."""
        if (self.entries - self._written) * ENTRY_SIZE >= INDEX_TAIL_LIMIT:
            self.write_pending(into)

    def cut_file_to_entries(self) -> None:
        """The file cut to the entries written to it (a commit of the active segment)."""
        if self._fd is not None and self._file_size > self._written * ENTRY_SIZE:
            os.ftruncate(self._fd, self._written * ENTRY_SIZE)
            self._file_size = self._written * ENTRY_SIZE

    def checksum(self) -> int:
        """CRC-32 of the valid entries, those not in the file yet included. Incremental: only entries added since
        the last call are hashed."""
        if self._crc is None:
            self._load()
            self._crc, self._crc_entries = zlib.crc32(self._buf), self.entries
        elif self._crc_entries < self.entries:
            self._crc = zlib.crc32(self._buf[(self._crc_entries - self._head) * ENTRY_SIZE:], self._crc)
            self._crc_entries = self.entries
        return self._crc

    def trim_to_valid_size(self) -> None:
        self.write_pending()
        if self._fd is not None and self._file_size != self.size_in_bytes:
            os.ftruncate(self._fd, self.size_in_bytes)
            self._file_size = self.size_in_bytes

    def sanity_check(self, every_entry: bool = True) -> None:
        """The file's length; with `every_entry`, also each entry's order (what a committed checksum
        already vouches for)."""
        if self._length % ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"Append-time index {self.path.name} is corrupt: {self._length} bytes is not a multiple of {ENTRY_SIZE}"
            )
        if not every_entry:
            return
        self._load()
        previous = None
        for i, (_t, offset) in enumerate(_ENTRY.iter_unpack(self._buf)):
            if previous is not None and offset <= previous:
                raise CorruptIndexError(f"Append-time index {self.path.name} has offsets out of order at entry {i}")
            previous = offset

    def flush(self) -> None:
        self.write_pending()
        if self._fd is not None:
            os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            self.trim_to_valid_size()
            os.close(self._fd)
            self._fd = None

    def close_handler(self) -> None:
        """The descriptor closed, nothing written or cut (Kafka's `AbstractIndex.closeHandler`)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self._written = self.entries  # nothing left to write to a file about to go
        self.close()
        self.path.unlink(missing_ok=True)
