"""Kafka's time index (`<base>.timeindex`): 12-byte entries `timestamp int64 | relativeOffset int32`.

Kafka's `TimeIndex.java`: an entry (T, O) says the largest timestamp in the segment up to and
including the batch ending at O is T, and O is the last offset of the first batch that reached T.
Timestamps are strictly increasing (an equal timestamp is silently skipped), offsets non-decreasing.
`is_full()` keeps one slot for the final entry appended on roll/close with `skip_full_check`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from storage.index import AbstractIndex, CorruptIndexError, IndexFullError, InvalidOffsetError
from validators.codec.record_batch import NO_TIMESTAMP

_TIME_ENTRY = struct.Struct(">qi")


class TimestampOrderError(RuntimeError):
    """Kafka's `IllegalStateException` for a timestamp smaller than the last one appended."""


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    timestamp: int
    offset: int


class TimeIndex(AbstractIndex):
    entry_size = 12
    index_kind = "time index"

    def _relative_offset(self, slot: int) -> int:
        return _TIME_ENTRY.unpack_from(self._data, slot * 12)[1]

    def _key(self, slot: int) -> int:
        return _TIME_ENTRY.unpack_from(self._data, slot * 12)[0]

    def is_full(self) -> bool:
        # One slot stays free for the roll/close entry (Kafka's `OffsetIndex`, `TimeIndex`).
        return self._entries >= self.max_entries - 1

    def entry(self, n: int) -> TimestampOffset:
        if n < 0 or n >= self._entries:
            raise IndexError(f"Attempt to fetch the {n}th entry from time index of size {self._entries}.")
        ts, rel = _TIME_ENTRY.unpack_from(self._data, n * 12)
        return TimestampOffset(ts, self.base_offset + rel)

    def all_entries(self) -> list[TimestampOffset]:
        return [TimestampOffset(ts, self.base_offset + r) for ts, r in _TIME_ENTRY.iter_unpack(bytes(self._data))]

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or `(-1, base_offset)` for an empty index."""
        if self._entries == 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(self._entries - 1)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Kafka's `TimeIndex.maybeAppend`; returns whether an entry was written (only when
        `timestamp` is larger than the last one)."""
        if not skip_full_check and self.is_full():
            raise IndexFullError(f"Attempt to append to a full time index (size = {self._entries}).")
        last_timestamp = NO_TIMESTAMP
        if self._entries != 0:  # the last entry read in place: this runs once per indexed batch
            last_timestamp, last_relative = _TIME_ENTRY.unpack_from(self._data, self._entries * 12 - 12)
            if offset < self.base_offset + last_relative:
                raise InvalidOffsetError(
                    f"Attempt to append an offset ({offset}) to slot {self._entries} no larger than the last "
                    f"offset appended ({self.base_offset + last_relative}) to {self.path}."
                )
            if timestamp < last_timestamp:
                raise TimestampOrderError(
                    f"Attempt to append a timestamp ({timestamp}) to slot {self._entries} no larger than the last "
                    f"timestamp appended ({last_timestamp}) to {self.path}."
                )
        if timestamp > last_timestamp:
            self._write_entry(_TIME_ENTRY.pack(timestamp, self._relative(offset)))
            return True
        return False

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Greatest entry with timestamp <= target; `(-1, base_offset)` when there is none."""
        slot = self._largest_lower_bound_slot(target_timestamp, by_key=True)
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(slot)

    def sanity_check(self, every_entry: bool = True) -> None:
        """Kafka's `sanityCheck`; with `every_entry`, also each entry's order (what a committed checksum
        already vouches for)."""
        if self._length % self.entry_size != 0:
            raise CorruptIndexError(
                f"Time index file {self.path.name} is corrupt, found {self._length} bytes which is neither "
                f"positive nor a multiple of {self.entry_size}."
            )
        if self._entries == 0:
            return
        last = self.last_entry
        first = self.entry(0)
        if last.timestamp < first.timestamp:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has non-zero size but the last "
                f"timestamp is {last.timestamp} which is less than the first timestamp {first.timestamp}"
            )
        if last.offset < self.base_offset:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has non-zero size but the last offset "
                f"is {last.offset} which is less than the first offset {self.base_offset}"
            )
        if not every_entry:
            return
        # Beyond Kafka's check: every entry in order (strictly increasing timestamps, offsets in order).
        prev_ts, prev_rel = NO_TIMESTAMP - 1, -1
        for ts, rel in _TIME_ENTRY.iter_unpack(bytes(self._data)):
            if ts <= prev_ts or rel < prev_rel or rel < 0:
                raise CorruptIndexError(
                    f"Time index file {self.path.name} has an entry out of order: timestamp {ts}, relative offset {rel}"
                )
            prev_ts, prev_rel = ts, rel
