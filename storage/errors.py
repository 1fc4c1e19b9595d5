"""The one error type of damaged segment storage (Kafka's `KafkaStorageException`).

Every reader and command meets a missing, short, zero-filled, over-long or garbage file either with a
rebuilt index (as Kafka's recovery would, `storage.segment_reader`) or with this error, whose message
names the file and what is wrong. `CorruptRecordError` (a bad batch in a `.log`) and
`CorruptIndexError` (an index that fails its sanity check) are its kinds.
"""

from __future__ import annotations


class KafkaStorageError(Exception):
    """A segment file or commit record cannot be used as it is; the message names the file."""
