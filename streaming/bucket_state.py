"""The stateful stage's state of one bucket: the partition state of every target partition hashed to it.

The stage groups the ingress by a fixed number of buckets of target partitions (`streaming.stage`), not by
partition: Spark's cost per group of `applyInPandasWithState` (a Python call, a state-store row, a frame) is
then bounded by the bucket count however many partitions a micro-batch touches. A bucket's state is one
state-store value: a JSON list of `[topic, partition, log_start_offset, log_end_offset, last_append_time_ms,
producers, topic_id]` entries (producers as `producer_state.producers_to_state`), sorted by (topic, partition).
The topic id tells the incarnations of a name apart: a deleted and re-created topic starts from a fresh state
(an entry without one, from an earlier version, belongs to the topic's seed id).
Only partitions that appended have an entry: hostile topic names never grow the state. Entries of the
partitions a micro-batch does not touch are carried over as they are, not decoded.
"""

from __future__ import annotations

import json
from typing import Any

from validators.append_result import PartitionState
from validators.producer_state import ProducerTable, producers_from_state, producers_to_state
from validators.topic_config import seed_topic_id

# The target partitions' buckets. Fixed: the state of a checkpoint is keyed by it (docs/deployment.md sizing).
STAGE_BUCKETS = 16
# Producer tables this worker encoded or decoded, by their state text: a partition's next micro-batch finds the
# text its last one wrote and takes the table as it is (immutable) instead of decoding it again. Emptied when full.
DECODED_PRODUCERS_LIMIT = 65_536
_decoded_producers: dict[str, ProducerTable] = {}

Target = tuple[str, int]


class BucketState:
    """A bucket's partition states, decoded once per micro-batch and partition only where it is decided."""

    def __init__(self, entries: dict[Target, list[Any]] | None = None) -> None:
        self._entries: dict[Target, list[Any]] = entries if entries is not None else {}
        self.changed = False

    @staticmethod
    def from_json(text: str | None) -> BucketState:
        """Raises ValueError on a value that is not this encoding."""
        if not text:
            return BucketState()
        entries: dict[Target, list[Any]] = {}
        for entry in json.loads(text):
            if not isinstance(entry, list) or len(entry) not in (6, 7):
                raise ValueError(f"not a partition state entry: {entry!r}")
            entries[(str(entry[0]), int(entry[1]))] = entry
        return BucketState(entries)

    def to_json(self) -> str:
        return json.dumps([self._entries[k] for k in sorted(self._entries)], separators=(",", ":"))

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, topic: str | None, partition: int | None, topic_id: str | None = None) -> PartitionState:
        """The partition's state; a fresh one when it has none, or when `topic_id` (given) is not its topic's."""
        entry = None if topic is None or partition is None else self._entries.get((topic, partition))
        if entry is None or (topic_id is not None and _entry_id(entry) != topic_id):
            return PartitionState()
        log_start, log_end, last_append, producers = entry[2:6]
        return PartitionState(log_start_offset=int(log_start), log_end_offset=int(log_end),
                              last_append_time_ms=int(last_append), producers=_producers_of(producers))

    def put(self, topic: str, partition: int, state: PartitionState, topic_id: str | None = None) -> None:
        text = producers_to_state(state.producers)
        _remember(text, state.producers)
        entry = [topic, partition, state.log_start_offset, state.log_end_offset, state.last_append_time_ms, text]
        self._entries[(topic, partition)] = [*entry, topic_id] if topic_id is not None else entry
        self.changed = True


def _producers_of(text: Any) -> ProducerTable:
    """The table of a state entry's producers text: the one this worker last encoded or decoded from it, else
    decoded (`producers_from_state`; raises ValueError)."""
    table = _decoded_producers.get(text) if type(text) is str else None
    if table is None:
        table = producers_from_state(text)
        if type(text) is str:
            _remember(text, table)
    return table


def _remember(text: str, table: ProducerTable) -> None:
    if len(_decoded_producers) >= DECODED_PRODUCERS_LIMIT:
        _decoded_producers.clear()
    _decoded_producers[text] = table


def _entry_id(entry: list[Any]) -> str:
    return str(entry[6]) if len(entry) > 6 else str(seed_topic_id(str(entry[0])))
