"""Our codec against kafka-python's independent one, both directions, every codec.

kafka-python (kafka.record) reads and writes v2 batches and v0/v1 message sets with gzip, snappy
(python-snappy, xerial framing), lz4 (lz4.frame) and zstd (zstandard). Its v0 lz4 path needs the
`xxhash` package, which is not a dependency, so magic-0 lz4 is covered by our own round trips.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from validators.codec.compression import CompressionType
from validators.codec.legacy_records import build_message_set, read_message_set
from validators.codec.record_batch import (
    TimestampType,
    build_record_batch,
    decode_record_batch,
    is_valid,
    iter_batches,
    parse_header,
)

LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
CODECS = list(CompressionType)
LEGACY_CODECS = [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4]
BIG = 1 << 30

keys = st.one_of(st.none(), st.binary(max_size=64))
values = st.one_of(st.none(), st.binary(max_size=256), st.binary(min_size=1000, max_size=3000))
headers = st.lists(st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=16))), max_size=4)
base_timestamps = st.one_of(
    st.sampled_from([LONG_MIN, LONG_MAX, -1, 0, 1700000000000]),
    st.integers(LONG_MIN, LONG_MAX),
    st.integers(-1, 1 << 45),
)


@st.composite
def timestamps(draw: st.DrawFn, size: int) -> list[int]:
    """A batch's timestamps: every delta from the first fits a Java long (as a real producer's do)."""
    base = draw(base_timestamps)
    low, high = max(LONG_MIN, LONG_MIN - base), min(LONG_MAX, LONG_MAX - base)
    deltas = draw(
        st.lists(
            st.one_of(
                st.integers(-10_000, 10_000), st.integers(low, high), st.sampled_from([low, high, 0])
            ).filter(lambda d: low <= d <= high),
            min_size=size - 1,
            max_size=size - 1,
        )
    )
    return [base] + [base + d for d in deltas]


@st.composite
def batches(
    draw: st.DrawFn, max_records: int = 40, non_negative: bool = False
) -> list[tuple[int, bytes | None, bytes | None, list]]:
    n = draw(st.integers(1, max_records))
    if non_negative:  # -1 or a real time, as a Java producer writes them (no filtering needed)
        ts = draw(st.lists(st.one_of(st.just(-1), st.integers(0, 1 << 45)), min_size=n, max_size=n))
    else:
        ts = draw(timestamps(n))
    return [(t, draw(keys), draw(values), draw(headers)) for t in ts]


many_records = st.integers(200, 1500).map(
    lambda n: [
        (1700000000000 + i * 7, None if i % 4 == 0 else b"k%d" % i, b"v" * (i % 50), []) for i in range(n)
    ]
)

SETTINGS = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def _theirs(batch: bytes) -> list[tuple[int, int, bytes | None, bytes | None, list]]:
    reader = DefaultRecordBatch(bytes(batch))
    assert reader.validate_crc()
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in reader]


# ------------------------------------------------------------------ ours -> kafka-python


@SETTINGS
@given(
    records=st.one_of(batches(), many_records),
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 1 << 40),
    log_append_time=st.one_of(st.none(), st.integers(0, 1 << 45)),
    producer=st.one_of(
        st.just((-1, -1, -1, False)),
        st.tuples(
            st.integers(0, 1 << 40), st.integers(0, 32767), st.integers(0, (1 << 31) - 1), st.booleans()
        ),
    ),
)
def test_kafka_python_reads_our_v2_batches(
    records: list, codec: CompressionType, base_offset: int, log_append_time: int | None, producer: tuple
) -> None:
    pid, epoch, seq, txn = producer
    batch = build_record_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        timestamp_type=TimestampType.LOG_APPEND_TIME
        if log_append_time is not None
        else TimestampType.CREATE_TIME,
        max_timestamp=log_append_time,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn,
    )
    reader = DefaultRecordBatch(bytes(batch))
    assert reader.compression_type == codec
    assert (
        reader.producer_id,
        reader.producer_epoch,
        reader.base_sequence,
        reader.is_transactional,
    ) == producer
    assert reader.base_offset == base_offset and reader.last_offset == base_offset + len(records) - 1
    expected_ts = [log_append_time if log_append_time is not None else t for t, *_ in records]
    assert _theirs(batch) == [
        (base_offset + i, expected_ts[i], k, v, list(h)) for i, (_, k, v, h) in enumerate(records)
    ]


@SETTINGS
@given(records=batches(), codec=st.sampled_from(CODECS))
def test_kafka_python_reads_our_concatenated_batches(records: list, codec: CompressionType) -> None:
    first = build_record_batch(records, compression=codec)
    second = build_record_batch(records[:1], compression=CompressionType.NONE, base_offset=len(records))
    data = first + second
    mr = MemoryRecords(data)
    theirs = []
    while mr.has_next():
        theirs.append(mr.next_batch())
    assert [b.base_offset for b in theirs] == [0, len(records)]
    assert list(iter_batches(data)) == [first, second]


# ------------------------------------------------------------------ kafka-python -> ours


@SETTINGS
@given(
    records=st.one_of(batches(), many_records),
    codec=st.sampled_from(CODECS),
    producer=st.one_of(
        st.just((-1, -1, -1, False)),
        st.tuples(
            st.integers(0, 1 << 40), st.integers(0, 32767), st.integers(0, (1 << 31) - 1), st.booleans()
        ),
    ),
)
def test_we_read_kafka_python_v2_batches(records: list, codec: CompressionType, producer: tuple) -> None:
    pid, epoch, seq, txn = producer
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=txn,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        batch_size=BIG,
    )
    for i, (t, k, v, h) in enumerate(records):
        assert builder.append(i, timestamp=t, key=k, value=v, headers=h) is not None
    theirs = bytes(builder.build())
    assert is_valid(theirs)
    decoded = decode_record_batch(theirs)
    assert decoded.is_valid
    h = decoded.header
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional) == producer
    assert (h.records_count, h.last_offset_delta, h.base_timestamp) == (
        len(records),
        len(records) - 1,
        records[0][0],
    )
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in decoded.records] == [
        (i, t, k, v, list(hs)) for i, (t, k, v, hs) in enumerate(records)
    ]
    assert [r.sequence for r in decoded.records] == [
        (seq + i) % (1 << 31) if seq >= 0 else -1 for i in range(len(records))
    ]


@SETTINGS
@given(
    records=batches(non_negative=True),
    producer=st.tuples(st.integers(-1, 1 << 40), st.integers(-1, 32767), st.integers(-1, 1000)),
)
def test_uncompressed_bytes_identical_to_kafka_python(records: list, producer: tuple) -> None:
    # kafka-python writes partitionLeaderEpoch 0 and starts maxTimestamp from the first record.
    pid, epoch, seq = producer
    builder = DefaultRecordBatchBuilder(2, 0, False, pid, epoch, seq, BIG)
    for i, (t, k, v, h) in enumerate(records):
        builder.append(i, timestamp=t, key=k, value=v, headers=h)
    ours = build_record_batch(
        records, partition_leader_epoch=0, producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )
    assert ours == bytes(builder.build())


# ------------------------------------------------------------------ legacy, both directions

legacy_records = st.lists(
    st.tuples(st.integers(0, 1 << 45), keys, st.one_of(st.none(), st.binary(max_size=300))),
    min_size=1,
    max_size=25,
)


@SETTINGS
@given(
    records=legacy_records,
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from(LEGACY_CODECS),
    base=st.integers(0, 1 << 40),
)
def test_kafka_python_reads_our_legacy_message_sets(
    records: list, magic: int, codec: CompressionType, base: int
) -> None:
    data = build_message_set(records, magic=magic, compression=codec, base_offset=base)
    mr = MemoryRecords(data)
    theirs = []
    while mr.has_next():
        batch = mr.next_batch()
        assert batch.magic == magic
        for r in batch:
            assert r.validate_crc()
            theirs.append((r.offset, r.timestamp, r.key, r.value))
    expected_ts = [None if magic == 0 else t for t, _, _ in records]
    assert theirs == [(base + i, expected_ts[i], k, v) for i, (_, k, v) in enumerate(records)]


@SETTINGS
@given(
    records=legacy_records,
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from(LEGACY_CODECS),
    base=st.integers(0, 1 << 40),
)
def test_we_read_kafka_python_legacy_message_sets(
    records: list, magic: int, codec: CompressionType, base: int
) -> None:
    builder = LegacyRecordBatchBuilder(magic, int(codec), BIG)
    for i, (t, k, v) in enumerate(records):
        builder.append(base + i if codec is CompressionType.NONE else i, timestamp=t, key=k, value=v)
    data = bytes(builder.build())
    entries = read_message_set(data)
    ours = [(r.offset, r.timestamp, r.key, r.value) for e in entries for r in e.records]
    # kafka-python's compressed wrapper has offset 0: Kafka reads inner offsets from base 0 then.
    first = base if codec is CompressionType.NONE else 0
    expected_ts = [-1 if magic == 0 else t for t, _, _ in records]
    assert ours == [(first + i, expected_ts[i], k, v) for i, (_, k, v) in enumerate(records)]
    assert all(r.is_valid for e in entries for r in e.records)


@settings(max_examples=30, deadline=None)
@given(records=batches(max_records=5), codec=st.sampled_from(CODECS))
def test_parse_header_agrees_with_kafka_python(records: list, codec: CompressionType) -> None:
    batch = build_record_batch(records, compression=codec, base_offset=77, partition_leader_epoch=9)
    ours = parse_header(batch)
    theirs = DefaultRecordBatch(bytes(batch))
    assert (ours.base_offset, ours.partition_leader_epoch, ours.crc, ours.records_count) == (
        theirs.base_offset,
        theirs.leader_epoch,
        theirs.crc,
        theirs.records_count,
    )
    assert (ours.base_timestamp, ours.max_timestamp) == (theirs.first_timestamp, theirs.max_timestamp)
