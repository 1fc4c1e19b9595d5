"""The segment settings of a topic (Kafka's `LogConfig` subset that storage uses, `LogSegment.append`; `LogSegment.shouldRoll`):
`segment.bytes`, `segment.ms` and its jitter, `index.interval.bytes`, `segment.index.bytes`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from validators.topic_config import TopicConfig


@dataclass(frozen=True, slots=True)
class SegmentConfig:
    """The topic configs a segment obeys (Kafka names in comments)."""

    segment_bytes: int = 1073741824  # segment.bytes
    segment_ms: int = 604800000  # segment.ms
    segment_jitter_ms: int = 0  # segment.jitter.ms
    segment_index_bytes: int = 10485760  # segment.index.bytes
    index_interval_bytes: int = 4096  # index.interval.bytes

    @staticmethod
    def from_topic(config: TopicConfig) -> SegmentConfig:
        return SegmentConfig(
            segment_bytes=config.segment_bytes,
            segment_ms=config.segment_ms,
            segment_jitter_ms=config.segment_jitter_ms,
            segment_index_bytes=config.segment_index_bytes,
            index_interval_bytes=config.index_interval_bytes,
        )

    @property
    def max_segment_ms(self) -> int:
        # LogConfig.maxSegmentMs(): min(max.compaction.lag.ms, segment.ms) only for compacted topics with a
        # finite lag; the gateway's topics are delete-policy (and TopicConfig has no compaction lag).
        return self.segment_ms


def roll_jitter_ms(topic: str, partition: int, base_offset: int, config: SegmentConfig) -> int:
    """Kafka draws `abs(random) % min(segment.jitter.ms, segment.ms)` per segment. Replays must roll
    identically, so the gateway derives it from a hash of (topic, partition, base offset): stable across
    processes and restarts, and still spread over partitions."""
    if config.segment_jitter_ms <= 0:
        return 0
    digest = hashlib.blake2b(f"{topic}-{partition}@{base_offset}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % min(config.segment_jitter_ms, config.segment_ms)
