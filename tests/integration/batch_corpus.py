"""A deterministic corpus of raw produce batches for the differential test against Apache Kafka.

`generate_corpus(now_ms)` returns about 500 `Case`s: the exact bytes a client would put into a
ProduceRequest for one topic-partition, which of the differential test's topics (`TOPICS`) it goes
to, and the error code Kafka answers (`expect`): Kafka's rules as `validators` reads them
prediction, corrected where Apache Kafka 4.2.1 was seen to answer otherwise (CORRUPT_EXPECT,
COMPRESSED_RECORDS_EXPECT, with the reason). Every choice (kind, sizes, keys, values, headers, codecs, partitions, order) comes from one
seeded `random.Random`, so a run is reproducible; only timestamps are relative to `now_ms`, and
they stay at least 10 minutes away from every window edge (`before`/`after` of one hour), so the
few seconds between the corpus clock, the gateway's clock and the broker's clock never matter.

Most batches are written with the project's own writer (`validators.codec.record_batch.build_record_batch`,
needed for deliberately broken headers); a share of the valid ones are written with kafka-python's
`DefaultRecordBatchBuilder` / `LegacyRecordBatchBuilder`, an independent codec.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from validators.codec.compression import CompressionType, compress
from validators.codec.record_batch import TimestampType, build_record_batch

SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
LONG_MIN = -(1 << 63)
INT_MIN = -(1 << 31)

# error codes (Kafka's `Errors`)
NONE = 0
UNKNOWN_SERVER_ERROR = -1
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
INVALID_TIMESTAMP = 32
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_RECORD = 87
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
FIXED_TS = 1_700_000_000_000  # LogAppendTime topics check no window: fixed timestamps, fixed bytes

SMALL_MAX_MESSAGE_BYTES = 2000
DEFAULT_MAX_MESSAGE_BYTES = 1048588  # Kafka 4.x max.message.bytes default (the test broker's is larger)
PARTITIONS = 2


@dataclass(frozen=True)
class TopicSpec:
    """`configs` go to the Kafka topic and the gateway alike; `gateway_configs` (gateway-only keys,
    which Kafka would refuse) to the gateway's TopicConfig only."""

    partitions: int
    configs: dict[str, str]
    gateway_configs: dict[str, str] = field(default_factory=dict)

    @property
    def log_append_time(self) -> bool:
        return self.configs.get("message.timestamp.type") == "LogAppendTime"


# The differential topics, created with the same configs on the broker and in the gateway's TopicConfig.
TOPICS: dict[str, TopicSpec] = {
    # CreateTime, one hour either way
    "ct": TopicSpec(PARTITIONS, {
        "message.timestamp.type": "CreateTime",
        "message.timestamp.before.max.ms": str(HOUR),
        "message.timestamp.after.max.ms": str(HOUR),
        "max.message.bytes": str(DEFAULT_MAX_MESSAGE_BYTES),
    }),
    # LogAppendTime: no window at all
    "lat": TopicSpec(PARTITIONS, {
        "message.timestamp.type": "LogAppendTime",
        "max.message.bytes": str(DEFAULT_MAX_MESSAGE_BYTES),
    }),
    # LogAppendTime again, the gateway walking every record (`gateway.record.validation=full`)
    # instead of deciding LogAppendTime batches from the header (its default, `fast`)
    "lat_full": TopicSpec(PARTITIONS, {
        "message.timestamp.type": "LogAppendTime",
        "max.message.bytes": str(DEFAULT_MAX_MESSAGE_BYTES),
    }, {"gateway.record.validation": "full"}),
    # compacted, Kafka 4.x default windows (before unlimited, after one hour)
    "compact": TopicSpec(PARTITIONS, {
        "cleanup.policy": "compact",
        "max.message.bytes": str(DEFAULT_MAX_MESSAGE_BYTES),
    }),
    # CreateTime with a small max.message.bytes
    "small": TopicSpec(PARTITIONS, {
        "message.timestamp.type": "CreateTime",
        "message.timestamp.before.max.ms": str(HOUR),
        "message.timestamp.after.max.ms": str(HOUR),
        "max.message.bytes": str(SMALL_MAX_MESSAGE_BYTES),
    }),
}

# Kafka 4.2.1 answers UNKNOWN_SERVER_ERROR (-1) to a compressed stream it cannot decode: the codec's
# IOException surfaces as a plain KafkaException ("Failed to decompress record stream", "Error
# checking for remaining bytes after reading batch"), which is no ApiException. (The Kafka's `Errors`
# says CORRUPT_MESSAGE; Kafka's own testCorruptLz4ProduceRequest breaks the lz4 header without fixing
# the batch CRC, so it only sees the CRC check.) Exceptions, seen from the broker: a garbled byte in
# the middle of a snappy/lz4/zstd stream (no content checksum) decodes to other bytes of a key or
# value, which the in-place path skips: accepted.
CORRUPT_EXPECT: dict[tuple[CompressionType, str], int] = {
    (CompressionType.SNAPPY, "middle byte garbled"): NONE,
    (CompressionType.LZ4, "middle byte garbled"): NONE,
    (CompressionType.ZSTD, "middle byte garbled"): NONE,
}
# Hand-made record shapes whose compressed variant Kafka 4.2.1 answers differently from the
# uncompressed one (see _corrupt_records). The compressed in-place path reads records with
# `readPartiallyFrom` (key/value skipped): a record length off by one is not noticed; reading past the
# stream's end is a KafkaException (-1); and a batch whose inner offsets are not 0..n-1 switches to
# the rebuild path, which asks the skipped-key PartialDefaultRecord for its key:
# UnsupportedOperationException "key is skipped in PartialDefaultRecord" (-1) — not the "repaired by
# rebuilding" the `LogValidator.validateMessagesAndAssignOffsetsCompressed` derives from the code.
COMPRESSED_RECORDS_EXPECT: dict[str, int] = {
    "a record length 1 too long": NONE,
    "a record length 1 too short": NONE,
    "key length beyond the record": UNKNOWN_SERVER_ERROR,
    "offsetDeltas 0,2,3": UNKNOWN_SERVER_ERROR,
    "offsetDeltas all 0": UNKNOWN_SERVER_ERROR,
}

CODECS = (CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4, CompressionType.ZSTD)
KP_CODECS = {
    CompressionType.NONE: DefaultRecordBatchBuilder.CODEC_NONE,
    CompressionType.GZIP: DefaultRecordBatchBuilder.CODEC_GZIP,
    CompressionType.SNAPPY: DefaultRecordBatchBuilder.CODEC_SNAPPY,
    CompressionType.LZ4: DefaultRecordBatchBuilder.CODEC_LZ4,
    CompressionType.ZSTD: DefaultRecordBatchBuilder.CODEC_ZSTD,
}

RecordTuple = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


@dataclass(frozen=True)
class Case:
    """One batch to send: to TOPICS[topic], partition `partition`.

    `expect`: Kafka's error code for it (checked too, so the corpus really exercises what its kind
    says). `legacy`: a magic 0/1 message set, which Kafka 4.x rejects at the
    request level (87) and the gateway deliberately accepts and up-converts (docs/design.md: ingress topic).
    `sequence`: cases of one idempotent-producer story keep their relative order when shuffled."""

    kind: str
    topic: str
    partition: int
    batch: bytes
    expect: int
    note: str
    legacy: bool = False
    sequence: str | None = None


class _Gen:
    def __init__(self, now_ms: int, seed: int) -> None:
        self.now = now_ms
        self.rng = random.Random(seed)
        self.cases: list[Case] = []
        self.sequenced: list[Case] = []

    # ---- random material

    def partition(self) -> int:
        return self.rng.randrange(PARTITIONS)

    def ts_valid(self) -> int:
        return self.now + self.rng.randint(-50 * MINUTE, 50 * MINUTE)

    def ts_old(self) -> int:
        return self.now - HOUR - self.rng.randint(10 * MINUTE, 30 * DAY)

    def ts_new(self) -> int:
        return self.now + HOUR + self.rng.randint(10 * MINUTE, 30 * DAY)

    def blob(self, low: int, high: int) -> bytes:
        return self.rng.randbytes(self.rng.randint(low, high))

    def key(self, *, nullable: bool = True) -> bytes | None:
        roll = self.rng.random()
        if nullable and roll < 0.15:
            return None
        if roll < 0.25:
            return b""  # an empty key is a key (compacted topics accept it)
        return self.blob(1, 16)

    def value(self, high: int = 120) -> bytes | None:
        return None if self.rng.random() < 0.1 else self.blob(0, high)

    def headers(self) -> tuple[tuple[str, bytes | None], ...]:
        return tuple(
            (f"h{i}-{self.rng.randrange(100)}", None if self.rng.random() < 0.2 else self.blob(0, 12))
            for i in range(self.rng.choice((0, 0, 0, 1, 2)))
        )

    def records(
        self, timestamps: Sequence[int], *, null_keys: bool = True, value_high: int = 120
    ) -> list[RecordTuple]:
        return [(ts, self.key(nullable=null_keys), self.value(value_high), self.headers()) for ts in timestamps]

    def count(self, high: int = 12) -> int:
        return self.rng.randint(1, high)

    def codec(self) -> CompressionType:
        return self.rng.choice(CODECS)

    # ---- writers

    def build(self, records: Sequence[RecordTuple], **kwargs: object) -> bytes:
        return build_record_batch(records, **kwargs)  # type: ignore[arg-type]

    def build_kafka_python(self, records: Sequence[RecordTuple], codec: CompressionType) -> bytes:
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=KP_CODECS[codec], is_transactional=False,
            producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 22,
        )
        for offset, (ts, key, value, headers) in enumerate(records):
            builder.append(offset, ts, key, value, list(headers))
        return bytes(builder.build())

    def add(self, kind: str, topic: str, batch: bytes, expect: int, note: str, *, legacy: bool = False) -> None:
        self.cases.append(Case(kind, topic, self.partition(), batch, expect, note, legacy=legacy))


def _codec_name(codec: CompressionType) -> str:
    return codec.kafka_name


# ------------------------------------------------------------------------------------------------
# the kinds


def _valid(g: _Gen) -> None:
    for i in range(65):
        topic = ("ct", "lat", "compact", "small", "lat_full")[i % 5]
        n = g.count(8 if topic == "small" else 12)
        recs = g.records([g.ts_valid() for _ in range(n)], null_keys=topic != "compact",
                         value_high=60 if topic == "small" else 120)
        if i % 3 == 0:
            batch, writer = g.build_kafka_python(recs, CompressionType.NONE), "kafka-python"
        else:
            batch, writer = g.build(recs), "ours"
        g.add("valid", topic, batch, NONE, f"{n} recs, none, {writer} writer")


def _valid_compressed(g: _Gen) -> None:
    for i in range(40):
        codec = CODECS[i % 4]
        topic = ("ct", "lat", "compact", "ct", "small")[i % 5]
        n = g.count(20)
        recs = g.records([g.ts_valid() for _ in range(n)], null_keys=topic != "compact",
                         value_high=40 if topic == "small" else 300)
        if i % 2 == 0:
            batch, writer = g.build_kafka_python(recs, codec), "kafka-python"
        else:
            batch, writer = g.build(recs, compression=codec), "ours"
        g.add("valid_compressed", topic, batch, NONE, f"{n} recs, {_codec_name(codec)}, {writer} writer")


def _out_of_window(g: _Gen) -> None:
    for kind, ts in (("too_old", g.ts_old), ("too_new", g.ts_new)):
        for i in range(24):
            topic = ("ct", "ct", "small", "compact", "lat", "ct")[i % 6]
            n = g.count(6)
            recs = g.records([ts() for _ in range(n)], null_keys=topic != "compact")
            if topic == "lat":
                expect = NONE  # no window on LogAppendTime topics
            elif topic == "compact" and kind == "too_old":
                expect = NONE  # before.max.ms defaults to Long.MAX_VALUE
            else:
                expect = INVALID_TIMESTAMP
            g.add(kind, topic, g.build(recs), expect, f"{n} recs, all {kind.replace('_', ' ')}")


def _no_timestamp(g: _Gen) -> None:
    for i in range(16):
        topic = ("ct", "lat", "compact", "small")[i % 4]
        n = g.count(6)
        if i % 2 == 0:
            stamps = [-1] * n
            note = f"{n} recs, all -1"
        else:
            stamps = [-1 if g.rng.random() < 0.5 else g.ts_valid() for _ in range(n)]
            note = f"{n} recs, -1 at {[j for j, t in enumerate(stamps) if t == -1]}"
        codec = CompressionType.NONE if i % 3 else g.codec()
        g.add("no_timestamp", topic, g.build(g.records(stamps, null_keys=topic != "compact"), compression=codec),
              NONE, f"{note}, {_codec_name(codec)}")


def _negative_timestamp(g: _Gen) -> None:
    """Negative timestamps other than -1: too old under a finite before.max.ms, accepted (stored
    verbatim) under the default; Long.MIN_VALUE wraps `now - ts` and is rejected as future."""
    for topic, stamps, expect in (
        ("ct", [-2, 5], INVALID_TIMESTAMP),
        ("ct", [-1000 * DAY], INVALID_TIMESTAMP),
        ("compact", [-2, -5000], NONE),
        ("compact", [LONG_MIN], INVALID_TIMESTAMP),
        ("compact", [g.ts_valid(), LONG_MIN + 1], INVALID_TIMESTAMP),
        ("lat", [-7, LONG_MIN], NONE),
    ):
        g.add("negative_timestamp", topic, g.build(g.records(stamps, null_keys=topic != "compact")), expect,
              f"timestamps {stamps}")


def _mixed(g: _Gen) -> None:
    pickers: dict[str, Callable[[], int]] = {
        "ok": g.ts_valid, "old": g.ts_old, "new": g.ts_new, "none": lambda: -1,
    }
    for i in range(30):
        topic = ("ct", "small", "compact", "ct", "lat")[i % 5]
        n = g.rng.randint(2, 14)
        while True:
            labels = [g.rng.choice(("ok", "ok", "old", "new", "none")) for _ in range(n)]
            bad = [j for j, lab in enumerate(labels) if lab in ("new",) or (lab == "old" and topic != "compact")]
            if bad and len(bad) < n:
                break
        codec = CompressionType.NONE if i % 4 else g.codec()
        recs = g.records([pickers[lab]() for lab in labels], null_keys=topic != "compact")
        expect = NONE if topic == "lat" else INVALID_TIMESTAMP
        shape = "".join({"ok": ".", "old": "O", "new": "N", "none": "-"}[lab] for lab in labels)
        g.add("mixed_timestamps", topic, g.build(recs, compression=codec), expect,
              f"{n} recs '{shape}' (.=ok O=old N=new -=-1), {_codec_name(codec)}")


def _log_append_time_bit(g: _Gen) -> None:
    """A client batch with attribute bit 3 (LogAppendTime): every record reads the header maxTimestamp."""
    variants: list[tuple[str, Callable[[], int], int]] = [
        ("ct", g.ts_valid, NONE),  # window-checked against maxTimestamp: inside -> accepted
        ("ct", g.ts_old, INVALID_TIMESTAMP),
        ("ct", g.ts_new, INVALID_TIMESTAMP),
        ("ct", lambda: -1, INVALID_TIMESTAMP),  # -1 falls into the LogAppendTime branch
        ("small", g.ts_valid, NONE),
        ("compact", g.ts_old, NONE),
        ("compact", lambda: -1, INVALID_TIMESTAMP),
        ("lat", g.ts_valid, INVALID_TIMESTAMP),  # LogAppendTime topic: the bit itself is the error
        ("lat", lambda: -1, INVALID_TIMESTAMP),
        ("lat", g.ts_old, INVALID_TIMESTAMP),
    ]
    for i in range(24):
        topic, header_ts, expect = variants[i % len(variants)]
        n = g.count(5)
        codec = CompressionType.NONE if i % 3 else g.codec()
        max_ts = header_ts()
        recs = g.records([g.ts_valid() for _ in range(n)], null_keys=topic != "compact")
        batch = g.build(recs, compression=codec, timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=max_ts)
        g.add("log_append_time_bit", topic, batch, expect,
              f"{n} recs, header maxTimestamp {max_ts - g.now if max_ts != -1 else -1:+} vs now, "
              f"{_codec_name(codec)}")


def _bad_crc(g: _Gen) -> None:
    for i in range(20):
        topic = ("ct", "lat", "compact", "small")[i % 4]
        n = g.count(6)
        codec = CompressionType.NONE if i % 2 else g.codec()
        recs = g.records([g.ts_valid() for _ in range(n)], null_keys=topic != "compact",
                         value_high=40 if topic == "small" else 120)
        batch = bytearray(g.build(recs, compression=codec))
        where = g.rng.randrange(17, len(batch))  # the CRC itself or a byte it covers
        batch[where] ^= 1 << g.rng.randrange(8)
        g.add("bad_crc", topic, bytes(batch), CORRUPT_MESSAGE, f"{n} recs, {_codec_name(codec)}, bit flipped at {where}")
    # partitionLeaderEpoch (bytes 12-15) is not covered by the CRC: any value is fine
    for _ in range(4):
        recs = g.records([g.ts_valid() for _ in range(g.count(4))])
        batch = g.build(recs, partition_leader_epoch=g.rng.randint(0, 1 << 30))
        g.add("leader_epoch_set", "ct", batch, NONE, "partitionLeaderEpoch set by the client (not in CRC)")


def _count_mismatch(g: _Gen) -> None:
    # (lastOffsetDelta, recordsCount) overrides relative to n actual records
    shapes: list[tuple[str, Callable[[int], tuple[int, int]]]] = [
        ("count > lastOffsetDelta+1", lambda n: (n - 1, n + 1)),
        ("count < lastOffsetDelta+1", lambda n: (n + 2, n)),
        ("lastOffsetDelta -1", lambda n: (-1, n)),
        ("lastOffsetDelta -3", lambda n: (-3, n)),
        ("count 0", lambda n: (n - 1, 0)),
        ("count -1", lambda n: (-1, -1)),
        ("consistent header, fewer than actual", lambda n: (n - 2, n - 1)),
        ("consistent header, more than actual", lambda n: (n, n + 1)),
        ("lastOffsetDelta 15, count 3", lambda n: (15, 3)),
    ]
    plan = [(label, shape, topic, CompressionType.NONE)
            for label, shape in shapes for topic in ("ct", "lat", "lat_full", "compact")]
    plan += [(label, shape, g.rng.choice(("ct", "lat", "compact")), g.codec()) for label, shape in shapes]
    for label, shape, topic, codec in plan:
        n = g.rng.randint(2, 6)
        lod, count = shape(n)
        recs = g.records([g.ts_valid() for _ in range(n)], null_keys=topic != "compact")
        batch = g.build(recs, compression=codec, last_offset_delta=lod, records_count=count)
        g.add("count_mismatch", topic, batch, INVALID_RECORD,
              f"{label}: {n} recs, lastOffsetDelta {lod}, count {count}, {_codec_name(codec)}")
    # a batch with no records at all (header only)
    for topic in ("ct", "lat"):
        g.add("count_mismatch", topic, g.build([], last_offset_delta=0, records_count=0), INVALID_RECORD,
              "empty batch: no records, count 0")


def _base_offset(g: _Gen) -> None:
    for i in range(8):
        topic = ("ct", "lat", "compact", "small")[i % 4]
        base = g.rng.choice((1, 5, 1 << 33, -1, -(1 << 40), g.rng.randint(2, 1000)))
        recs = g.records([g.ts_valid() for _ in range(g.count(4))], null_keys=topic != "compact", value_high=40)
        g.add("base_offset_nonzero", topic, g.build(recs, base_offset=base), INVALID_RECORD, f"baseOffset {base}")


def _sized(g: _Gen, size: int) -> bytes:
    """An uncompressed one-record batch of exactly `size` bytes (key and value lengths searched:
    a varint length step can skip a size for one key length, never for two neighbouring ones)."""
    ts = g.ts_valid()
    for key_length in range(1, 9):
        key = g.rng.randbytes(key_length)
        for length in range(max(0, size - 61 - 40), size):
            batch = build_record_batch([(ts, key, g.rng.randbytes(length))])
            if len(batch) == size:
                return batch
            if len(batch) > size:
                break
    raise AssertionError(f"no one-record batch of exactly {size} bytes")


def _oversized(g: _Gen) -> None:
    limit = SMALL_MAX_MESSAGE_BYTES
    g.add("oversized", "small", _sized(g, limit + 1), MESSAGE_TOO_LARGE, f"exactly {limit + 1} bytes")
    g.add("size_at_limit", "small", _sized(g, limit), NONE, f"exactly {limit} bytes")
    g.add("size_at_limit", "small", _sized(g, limit - 1), NONE, f"exactly {limit - 1} bytes")
    for i in range(10):
        n = g.count(30)
        recs = g.records([g.ts_valid() for _ in range(n)], value_high=400)
        while len(g.build(recs)) <= limit:
            recs.append((g.ts_valid(), g.blob(0, 8), g.blob(200, 400), ()))
        codec = CompressionType.NONE if i % 2 else g.codec()
        batch = g.build(recs, compression=codec)  # random bytes do not compress: still too large
        note = f"{len(recs)} recs, {len(batch)} bytes, {_codec_name(codec)}"
        if i == 3:  # the size check comes before the CRC check
            corrupt = bytearray(batch)
            corrupt[-1] ^= 0xFF
            batch, note = bytes(corrupt), note + ", bad CRC too"
        elif i == 5:  # ... and before the timestamp checks
            batch = g.build([(g.ts_old(), k, v, h) for _, k, v, h in recs], compression=codec)
            note += ", all too old too"
        if len(batch) > limit:
            g.add("oversized", "small", batch, MESSAGE_TOO_LARGE, note)
    # compressible values: larger than the limit uncompressed, far smaller compressed -> accepted
    for codec in CODECS:
        recs = [(g.ts_valid(), g.blob(1, 8), b"\x00" * 900, ()) for _ in range(5)]
        batch = g.build(recs, compression=codec)
        g.add("compressed_under_limit", "small", batch, NONE,
              f"5 x 900 zero bytes, {_codec_name(codec)}: {len(batch)} bytes on the wire")


def _compressed_invalid_timestamp(g: _Gen) -> None:
    for i in range(24):
        codec = CODECS[i % 4]
        topic = ("ct", "compact", "small")[i % 3]
        n = g.rng.randint(1, 10)
        stamps = [g.rng.choice((g.ts_valid, g.ts_new, g.ts_old, lambda: -1))() for _ in range(n)]
        stamps[g.rng.randrange(n)] = g.ts_new()  # at least one invalid on every topic
        recs = g.records(stamps, null_keys=topic != "compact", value_high=40 if topic == "small" else 200)
        batch = g.build_kafka_python(recs, codec) if i % 2 else g.build(recs, compression=codec)
        g.add("compressed_invalid_timestamp", topic, batch, INVALID_TIMESTAMP, f"{n} recs, {_codec_name(codec)}")


def _null_keys_compacted(g: _Gen) -> None:
    for i in range(20):
        n = g.rng.randint(1, 8)
        codec = CompressionType.NONE if i % 2 else g.codec()
        keys = [None if g.rng.random() < 0.5 else g.rng.choice((b"", g.blob(1, 8))) for _ in range(n)]
        if i % 5 == 4:
            keys = [g.blob(1, 8) if k is None else k for k in keys]  # control: no null key at all
        stamps = [g.ts_valid() for _ in range(n)]
        if i % 4 == 1:  # bad timestamps on some records too: INVALID_TIMESTAMP wins, all errors listed
            for j in g.rng.sample(range(n), k=max(1, n // 2)):
                stamps[j] = g.ts_new()
        recs = [(ts, k, g.value(), g.headers()) for ts, k in zip(stamps, keys, strict=True)]
        batch = g.build(recs, compression=codec)
        if any(ts > g.now + HOUR and k is not None for ts, k in zip(stamps, keys, strict=True)):
            expect = INVALID_TIMESTAMP  # a null-key record's timestamp is not checked (key error first)
        elif any(k is None for k in keys):
            expect = INVALID_RECORD
        else:
            expect = NONE
        nulls = [j for j, k in enumerate(keys) if k is None]
        g.add("null_key_compacted", "compact", batch, expect, f"{n} recs, null keys at {nulls}, {_codec_name(codec)}")
    # null keys are fine on a non-compacted topic
    for topic in ("ct", "lat"):
        recs = [(g.ts_valid(), None, g.value(), ()) for _ in range(3)]
        g.add("null_key_not_compacted", topic, g.build(recs), NONE, "3 recs, all keys null")


def _control(g: _Gen) -> None:
    for i in range(6):
        topic = ("ct", "lat", "compact")[i % 3]
        codec = CompressionType.NONE if i < 3 else g.codec()
        # a control record's key is (version int16, type int16); 0 = ABORT, 1 = COMMIT. Not marked
        # transactional: a transactional batch in a request without a transactional id is refused
        # for the whole request (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) before any record check.
        recs = [(g.ts_valid(), struct.pack(">hh", 0, i % 2), struct.pack(">hi", 0, 0), ())]
        batch = g.build(recs, compression=codec, is_control=True)
        g.add("control_bit", topic, batch, INVALID_RECORD, f"control batch, {_codec_name(codec)}")


def _bad_sequence(g: _Gen) -> None:
    for i, seq in enumerate((-1, -2, -100, INT_MIN, -1, -1, -7, -1)):
        topic = ("ct", "lat", "compact", "small")[i % 4]
        codec = CompressionType.NONE if i % 3 else g.codec()
        recs = g.records([g.ts_valid() for _ in range(g.count(4))], null_keys=topic != "compact", value_high=40)
        batch = g.build(recs, compression=codec, producer_id=g.rng.randint(0, 1 << 40), producer_epoch=0,
                        base_sequence=seq)
        g.add("idempotent_negative_sequence", topic, batch, INVALID_RECORD, f"baseSequence {seq}, {_codec_name(codec)}")


def _unknown_codec(g: _Gen) -> None:
    """Attribute codec ids 5-7 (valid CRC): CompressionType.forId throws a non-ApiException."""
    for i, codec_id in enumerate((5, 6, 7)):
        recs = g.records([g.ts_valid() for _ in range(2)])
        batch = g.build(recs, attributes_extra=codec_id)
        g.add("unknown_codec", ("ct", "lat", "compact")[i], batch, UNKNOWN_SERVER_ERROR, f"codec id {codec_id}")


def _legacy(g: _Gen) -> None:
    """Magic 0/1 message sets: Kafka 4.x rejects them at the request level (87); the gateway accepts
    and up-converts them (docs/design.md: ingress topic) — the one documented difference."""
    for i in range(8):
        magic = i % 2
        topic = ("ct", "lat", "compact", "ct")[(i // 2) % 4]
        codec = (CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.NONE)[i // 2]
        builder = LegacyRecordBatchBuilder(magic=magic, compression_type=KP_CODECS[codec], batch_size=1 << 20)
        n = g.count(4)
        for offset in range(n):
            builder.append(offset, g.ts_valid(), g.blob(1, 8), g.blob(0, 60))
        g.add("legacy_magic", topic, bytes(builder.build()), INVALID_RECORD,
              f"magic {magic}, {n} recs, {_codec_name(codec)}", legacy=True)


def _corrupt_compressed(g: _Gen) -> None:
    """A correct batch CRC over a broken compressed stream. Sent to the LogAppendTime topic with
    fixed timestamps, so the bytes (and whether a garbled byte breaks the codec) are the same in
    every run."""
    for codec in CODECS:
        recs = [(FIXED_TS + j, g.blob(1, 8), g.blob(20, 200), ()) for j in range(g.rng.randint(2, 6))]
        good = g.build(recs, compression=codec)
        area = good[61:]
        variants = [
            ("truncated to half", area[: len(area) // 2]),
            ("last byte dropped", area[:-1]),
            ("first byte (codec magic) flipped", bytes([area[0] ^ 0xFF]) + area[1:]),
            ("middle byte garbled", area[: len(area) // 2] + bytes([area[len(area) // 2] ^ 0x5A])
             + area[len(area) // 2 + 1:]),
        ]
        if codec is CompressionType.LZ4:  # Kafka's testCorruptLz4ProduceRequest: frame header checksum
            variants.append(("lz4 header checksum (byte 6) zeroed", area[:6] + b"\x00" + area[7:]))
        for how, broken in variants:
            g.add("corrupt_compressed", "lat", _rewrap(good, broken), CORRUPT_EXPECT.get((codec, how), UNKNOWN_SERVER_ERROR),
                  f"{_codec_name(codec)}, {len(recs)} recs, stream {how}")


def _zigzag(value: int) -> bytes:
    """A zigzag varint/varlong (DefaultRecord's encoding), written here independently of validators/."""
    unsigned = (value << 1) ^ (value >> 63)
    unsigned &= (1 << 64) - 1
    out = bytearray()
    while unsigned >= 0x80:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)
    return bytes(out)


def _raw_record(ts_delta: int, offset_delta: int, key: bytes | None, value: bytes | None, *,
                header_count: int = 0, attributes: int = 0, length_adjust: int = 0) -> bytes:
    body = bytes([attributes]) + _zigzag(ts_delta) + _zigzag(offset_delta)
    for part in (key, value):
        body += _zigzag(-1) if part is None else _zigzag(len(part)) + part
    body += _zigzag(header_count)
    return _zigzag(len(body) + length_adjust) + body


def _corrupt_records(g: _Gen) -> None:
    """Batches with a correct CRC and a consistent header whose record bytes are malformed (or
    merely unusual), built by hand: what DefaultRecord.readFrom and the batch's record iterator make
    of them. Uncompressed to every kind of topic (path A: offsetDeltas and the unused record
    attributes are not inspected), and once compressed (see COMPRESSED_RECORDS_EXPECT). The record
    bytes do not depend on the clock (fixed timestamp deltas), so neither do the compressed streams."""
    def batch_of(records: list[bytes], count: int, codec: CompressionType = CompressionType.NONE) -> bytes:
        ts = g.ts_valid()
        template = build_record_batch([(ts, b"k", b"v")] * count, compression=codec)
        area = b"".join(records)
        if codec is not CompressionType.NONE:
            area = compress(codec, area)
        return _rewrap(template, area)

    def good(j: int) -> bytes:
        return _raw_record(j * 7, j, g.blob(1, 6), g.blob(0, 30))

    shapes: list[tuple[str, Callable[[], tuple[list[bytes], int]], int]] = [
        ("record area cut by 2 bytes", lambda: ([good(0), good(1), good(2)[:-2]], 3), INVALID_RECORD),
        ("2 trailing bytes after the last record", lambda: ([good(0), good(1), b"\x00\x00"], 2), INVALID_RECORD),
        ("a record length 1 too long", lambda: ([good(0), _raw_record(7, 1, b"k", b"vv", length_adjust=1)], 2),
         INVALID_RECORD),
        ("a record length 1 too short", lambda: ([_raw_record(0, 0, b"k", b"vv", length_adjust=-1), good(1)], 2),
         INVALID_RECORD),
        ("header count -1", lambda: ([good(0), _raw_record(7, 1, b"k", b"v", header_count=-1)], 2), INVALID_RECORD),
        ("header count 3, no headers", lambda: ([_raw_record(0, 0, b"k", b"v", header_count=3), good(1)], 2),
         INVALID_RECORD),
        ("key length beyond the record", lambda: ([good(0), _raw_record(7, 1, b"k", b"v")[:3] + _zigzag(100)
                                                   + _raw_record(7, 1, b"k", b"v")[4:]], 2), INVALID_RECORD),
        ("offsetDeltas 0,2,3", lambda: ([good(0), good(2), good(3)], 3), NONE),
        ("offsetDeltas all 0", lambda: ([good(0), _raw_record(1, 0, b"a", b"b"), _raw_record(2, 0, b"c", b"d")], 3),
         NONE),
        ("record attributes byte 0x7f (unused)", lambda: ([_raw_record(0, 0, b"k", b"v", attributes=0x7F)], 1), NONE),
    ]
    for label, make, expect in shapes:
        for topic in ("ct", "lat", "lat_full", "compact"):
            records, count = make()
            g.add("corrupt_records", topic, batch_of(records, count), expect, f"{label}, none")
        codec = g.codec()
        records, count = make()
        g.add("corrupt_records", g.rng.choice(("ct", "lat")), batch_of(records, count, codec),
              COMPRESSED_RECORDS_EXPECT.get(label, expect), f"{label}, {_codec_name(codec)}")


def _transactional(g: _Gen) -> None:
    """The transactional bit without a transactional.id in the request: the whole request is refused."""
    for i in range(3):
        recs = g.records([g.ts_valid() for _ in range(g.count(3))])
        batch = g.build(recs, is_transactional=True, producer_id=g.rng.randint(1, 1 << 40), producer_epoch=0,
                        base_sequence=0, compression=CompressionType.NONE if i else g.codec())
        g.add("transactional_no_txn_id", ("ct", "lat", "compact")[i], batch, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
              "transactional batch, request without transactional.id")


def _rewrap(header_source: bytes, area: bytes) -> bytes:
    """`header_source`'s header over a new records area, with batchLength and CRC fixed up."""
    out = bytearray(header_source[:61]) + area
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def _idempotent_stories(g: _Gen) -> None:
    """Producer-id state across batches (Kafka's produce path (`UnifiedLog.append`) step 17): order within a story matters."""
    for story, topic in enumerate(("ct", "lat", "ct")):
        partition = g.partition()
        pid = g.rng.randint(1, 1 << 40)
        name = f"pid-{story}"

        def batch(epoch: int, seq: int, n: int, pid: int = pid, topic: str = topic) -> bytes:
            recs = g.records([g.ts_valid() for _ in range(n)], value_high=40)
            return g.build(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq)

        first, second = batch(0, 0, 3), batch(0, 3, 2)
        steps = [
            ("epoch 0 seq 0..2 (new producer)", first, NONE),
            ("epoch 0 seq 3..4", second, NONE),
            ("retry of seq 3..4 (duplicate)", second, NONE),
            ("retry of seq 0..2 (older duplicate)", first, NONE),
            ("epoch 0 seq 9 (gap)", batch(0, 9, 1), OUT_OF_ORDER_SEQUENCE_NUMBER),
            ("epoch 0 seq 5..6", batch(0, 5, 2), NONE),
            ("epoch 1 seq 4 (new epoch must start at 0)", batch(1, 4, 1), OUT_OF_ORDER_SEQUENCE_NUMBER),
            ("epoch 1 seq 0", batch(1, 0, 1), NONE),
            ("epoch 0 seq 7 (fenced epoch)", batch(0, 7, 1), INVALID_PRODUCER_EPOCH),
            ("epoch 1 seq 1", batch(1, 1, 2), NONE),
        ]
        for step, (note, data, expect) in enumerate(steps):
            g.sequenced.append(Case("idempotent_sequence", topic, partition, data, expect,
                                    f"{name} step {step}: {note}", sequence=name))


def generate_corpus(now_ms: int, seed: int = 20240917) -> list[Case]:
    """The corpus, shuffled deterministically; idempotent stories keep their internal order."""
    g = _Gen(now_ms, seed)
    for make in (
        _valid, _valid_compressed, _out_of_window, _no_timestamp, _negative_timestamp, _mixed,
        _log_append_time_bit, _bad_crc, _count_mismatch, _base_offset, _oversized,
        _compressed_invalid_timestamp, _null_keys_compacted, _control, _bad_sequence, _unknown_codec,
        _legacy, _corrupt_compressed, _corrupt_records, _transactional, _idempotent_stories,
    ):
        make(g)
    cases = list(g.cases)
    g.rng.shuffle(cases)
    positions = sorted(g.rng.sample(range(len(cases) + len(g.sequenced)), len(g.sequenced)))
    for position, case in zip(positions, g.sequenced, strict=True):
        cases.insert(position, case)
    return cases
