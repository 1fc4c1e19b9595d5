"""Kafka's sparse offset index (`<base>.index`) and the index file mechanics shared with the time index.

Kafka's `AbstractIndex.java` and `OffsetIndex.java`:
- 8-byte entries `relativeOffset int32 | position int32`, big-endian, strictly increasing offsets;
- a writable index of the active segment has room for `floor(segment.index.bytes / entry)` entries (Kafka
  preallocates its file; here the file holds only the entries written, `storage/index.py`) and is trimmed to
  its valid entries on roll and close;
- a pre-existing file is taken as valid up to its length rounded down to the entry size (Kafka assumes
  a pre-existing index is valid); `sanity_check` is the check that decides a rebuild at load.

Not memory-mapped: the valid entries live in a `bytearray` mirror (lookups). New entries are written
to the file behind the mirror, in one `pwrite` per `write_pending` (the segment calls it before a
commit, a flush or a close): readers only trust what a commit record covers.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from storage.index import AbstractIndex, CorruptIndexError, IndexFullError, InvalidOffsetError

_OFFSET_ENTRY = struct.Struct(">ii")


@dataclass(frozen=True, slots=True)
class OffsetPosition:
    offset: int
    position: int


class OffsetIndex(AbstractIndex):
    """`<base>.index`: relative offset -> byte position of the batch starting there (Kafka's `OffsetIndex`, `TimeIndex`)."""

    entry_size = 8
    index_kind = "offset index"

    def _relative_offset(self, slot: int) -> int:
        return _OFFSET_ENTRY.unpack_from(self._data, slot * 8)[0]

    _key = _relative_offset

    def entry(self, n: int) -> OffsetPosition:
        if n < 0 or n >= self._entries:
            raise IndexError(f"Attempt to fetch the {n}th entry from an index of size {self._entries}.")
        rel, pos = _OFFSET_ENTRY.unpack_from(self._data, n * 8)
        return OffsetPosition(self.base_offset + rel, pos)

    def all_entries(self) -> list[OffsetPosition]:
        return [OffsetPosition(self.base_offset + r, p) for r, p in _OFFSET_ENTRY.iter_unpack(bytes(self._data))]

    @property
    def last_entry(self) -> OffsetPosition:
        if self._entries == 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(self._entries - 1)

    @property
    def last_position(self) -> int:
        """The last entry's position, 0 when there is none (`last_entry.position`, read without making it)."""
        if self._entries == 0:
            return 0
        return _OFFSET_ENTRY.unpack_from(self._data, self._entries * 8 - 8)[1]

    @property
    def last_offset(self) -> int:
        return self.last_entry.offset

    def append(self, offset: int, position: int) -> None:
        """Kafka's `OffsetIndex.append`: only offsets larger than the last one; never into a full index."""
        if self.is_full():
            raise IndexFullError(f"Attempt to append to a full index (size = {self._entries}).")
        if self._entries != 0 and offset <= self.base_offset + _OFFSET_ENTRY.unpack_from(self._data, self._entries * 8 - 8)[0]:
            raise InvalidOffsetError(
                f"Attempt to append an offset {offset} to position {self._entries} no larger than the last "
                f"offset appended ({self.last_offset}) to {self.path}."
            )
        self._write_entry(_OFFSET_ENTRY.pack(self._relative(offset), position))

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Greatest entry with offset <= target; `(base_offset, 0)` when there is none."""
        slot = self._largest_lower_bound_slot(target_offset - self.base_offset, by_key=False)
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(slot)

    def sanity_check(self, every_entry: bool = True) -> None:
        """Kafka's `sanityCheck`; with `every_entry`, also each entry's order (what a committed checksum
        already vouches for)."""
        if self._length % self.entry_size != 0:
            raise CorruptIndexError(
                f"Index file {self.path.name} is corrupt, found {self._length} bytes which is neither positive "
                f"nor a multiple of {self.entry_size}."
            )
        if self._entries != 0 and self.last_offset < self.base_offset:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self.path}) has non-zero size but the last offset is "
                f"{self.last_offset} which is less than the base offset {self.base_offset}."
            )
        if not every_entry:
            return
        # Beyond Kafka's check (which trusts the mmap): entries must be strictly increasing, else a
        # lookup's binary search is wrong.
        previous = -1
        for rel, _pos in _OFFSET_ENTRY.iter_unpack(bytes(self._data)):
            if rel <= previous:
                raise CorruptIndexError(f"Index file {self.path.name} has offsets out of order at relative offset {rel}")
            previous = rel
