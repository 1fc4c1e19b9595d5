"""Kafka's default partitioner for keyed records: murmur2 of the key, positive, modulo the partitions
(`Utils.murmur2`, `BuiltInPartitioner.partitionForKey`), so keys land where a Java producer puts them.
"""

from __future__ import annotations


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2` (seed 0x9747b28c), as a signed 32-bit int."""
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    r = 24
    h = (seed ^ length) & 0xFFFFFFFF
    for i in range(length // 4):
        k = int.from_bytes(data[i * 4 : i * 4 + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    tail = length & ~3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """`BuiltInPartitioner.partitionForKey`: toPositive(murmur2(key)) % numPartitions."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions
