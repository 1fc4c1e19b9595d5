"""Compression codecs: Kafka's byte formats, Kafka's reader quirks, bounded decompression."""

from __future__ import annotations

import gzip
import random
import struct
import time
import tracemalloc
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from validators.codec.compression import (
    CompressionType,
    CorruptCompressedDataError,
    DecompressionLimitExceededError,
    compress,
    decompress,
    xxh32,
)

CODECS = list(CompressionType)
COMPRESSED = [c for c in CompressionType if c is not CompressionType.NONE]


# ------------------------------------------------------------------ enum


def test_compression_type_ids_and_kafka_names() -> None:
    assert [(c.value, c.kafka_name) for c in CompressionType] == [
        (0, "none"),
        (1, "gzip"),
        (2, "snappy"),
        (3, "lz4"),
        (4, "zstd"),
    ]
    assert CompressionType.for_id(3) is CompressionType.LZ4
    assert CompressionType.for_name("zstd") is CompressionType.ZSTD


@pytest.mark.parametrize("type_id", [5, 6, 7])
def test_unknown_compression_type_id_is_kafkas_illegal_argument(type_id: int) -> None:
    with pytest.raises(ValueError, match=f"^Unknown compression type id: {type_id}$"):
        CompressionType.for_id(type_id)
    with pytest.raises(ValueError, match=f"^Unknown compression type id: {type_id}$"):
        decompress(type_id, b"whatever")
    with pytest.raises(ValueError, match=f"^Unknown compression type id: {type_id}$"):
        compress(type_id, b"whatever")


def test_unknown_compression_name() -> None:
    with pytest.raises(ValueError, match="^Unknown compression name: brotli$"):
        CompressionType.for_name("brotli")


# ------------------------------------------------------------------ round trips


@settings(max_examples=60, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=4096), magic=st.sampled_from([0, 1, 2]))
def test_round_trip_small(codec: CompressionType, data: bytes, magic: int) -> None:
    assert decompress(codec, compress(codec, data, magic=magic), magic=magic) == data


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("size", [0, 1, 65535, 65536, 65537, 32 * 1024 * 5 + 3, 300_000])
def test_round_trip_block_boundaries(codec: CompressionType, size: int) -> None:
    data = bytes((i * 7 + i // 300) & 0xFF for i in range(size))
    assert decompress(codec, compress(codec, data)) == data


def test_xxh32_known_vectors() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F
    # The LZ4 header checksum liblz4 writes for FLG 0x60 / BD 0x40 is (xxh32 >> 8) & 0xFF = 0x82.
    assert (xxh32(b"\x60\x40") >> 8) & 0xFF == 0x82


@settings(max_examples=40, deadline=None)
@given(st.binary(min_size=0, max_size=3000))
def test_xxh32_matches_liblz4_block_checksums(data: bytes) -> None:
    frame = lz4.frame.compress(
        data, block_linked=False, block_checksum=True, content_checksum=False, store_size=False
    )
    if data:
        # first block: size word, payload, then the xxh32 of the payload (LE)
        pos = 7
        size = struct.unpack_from("<I", frame, pos)[0] & 0x7FFFFFFF
        block = frame[pos + 4 : pos + 4 + size]
        assert xxh32(block) == struct.unpack_from("<I", frame, pos + 4 + size)[0]


# ------------------------------------------------------------------ gzip


def test_gzip_writes_javas_gzip_header_and_stdlib_reads_it() -> None:
    out = compress(CompressionType.GZIP, b"hello kafka")
    assert out[:10] == bytes.fromhex("1f8b08000000000000ff")  # GZIPOutputStream (JDK >= 16)
    assert gzip.decompress(out) == b"hello kafka"
    assert kafka_codec.gzip_decode(out) == b"hello kafka"


def test_gzip_reads_concatenated_members_and_ignores_trailing_garbage() -> None:
    a = gzip.compress(b"first ")
    b = gzip.compress(b"second")
    assert decompress(CompressionType.GZIP, a + b) == b"first second"
    # GZIPInputStream.readTrailer: bytes that do not form a member header end the stream.
    assert decompress(CompressionType.GZIP, a + b"junk after the member") == b"first "


@pytest.mark.parametrize("cut", [1, 5, 9])
def test_gzip_truncated_stream_is_corrupt(cut: int) -> None:
    out = compress(CompressionType.GZIP, b"x" * 1000)
    with pytest.raises(CorruptCompressedDataError):
        decompress(CompressionType.GZIP, out[:-cut])


def test_gzip_bad_magic_and_bad_deflate_are_corrupt() -> None:
    with pytest.raises(CorruptCompressedDataError, match="Not in GZIP format"):
        decompress(CompressionType.GZIP, b"not gzip at all")
    bad = bytearray(compress(CompressionType.GZIP, b"y" * 1000))
    bad[12] ^= 0xFF
    with pytest.raises(CorruptCompressedDataError):
        decompress(CompressionType.GZIP, bytes(bad))


def test_gzip_crc_mismatch_is_corrupt() -> None:
    bad = bytearray(compress(CompressionType.GZIP, b"z" * 100))
    bad[-8] ^= 0x01  # CRC32 trailer
    with pytest.raises(CorruptCompressedDataError):
        decompress(CompressionType.GZIP, bytes(bad))


# ------------------------------------------------------------------ snappy


def test_snappy_writes_xerial_framing() -> None:
    data = bytes(range(256)) * 300  # 76800 bytes -> 3 blocks of <= 32 KiB
    out = compress(CompressionType.SNAPPY, data)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos = 16
    blocks = []
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(out[pos + 4 : pos + 4 + n])))
        pos += 4 + n
    assert pos == len(out)
    assert [len(b) for b in blocks] == [32768, 32768, 11264]
    assert b"".join(blocks) == data
    assert kafka_codec.snappy_decode(out) == data


def test_snappy_reads_kafka_python_xerial_and_raw_snappy() -> None:
    data = b"kafka snappy " * 5000
    assert decompress(CompressionType.SNAPPY, kafka_codec.snappy_encode(data)) == data
    # SnappyInputStream: no stream magic -> the input is one raw block (Snappy.compress output)
    assert (
        decompress(CompressionType.SNAPPY, kafka_codec.snappy_encode(data, xerial_compatible=False)) == data
    )
    short_raw = bytes(cramjam.snappy.compress_raw(b"tiny"))
    assert len(short_raw) < 16
    assert decompress(CompressionType.SNAPPY, short_raw) == b"tiny"


def test_snappy_xerial_reader_quirks() -> None:
    a = compress(CompressionType.SNAPPY, b"first ")
    b = compress(CompressionType.SNAPPY, b"second")
    # concatenated SnappyOutputStream outputs: the second stream header is skipped
    assert decompress(CompressionType.SNAPPY, a + b) == b"first second"
    # hasNextChunk: fewer than 4 bytes left -> end of stream
    assert decompress(CompressionType.SNAPPY, a + b"\x00\x01\x02") == b"first "


def test_snappy_xerial_errors() -> None:
    good = compress(CompressionType.SNAPPY, b"payload " * 100)
    with pytest.raises(CorruptCompressedDataError, match="incompatible codec version 0"):
        decompress(CompressionType.SNAPPY, good[:8] + struct.pack(">ii", 0, 1) + good[16:])
    with pytest.raises(CorruptCompressedDataError, match="failed to read chunk"):
        decompress(CompressionType.SNAPPY, good[:-1])
    with pytest.raises(CorruptCompressedDataError, match="negative"):
        decompress(CompressionType.SNAPPY, good[:16] + struct.pack(">i", -5) + b"abcd")
    with pytest.raises(CorruptCompressedDataError, match="empty"):
        decompress(CompressionType.SNAPPY, b"")
    bad = bytearray(good)
    bad[21] ^= 0xFF
    with pytest.raises(CorruptCompressedDataError):
        decompress(CompressionType.SNAPPY, bytes(bad))


# ------------------------------------------------------------------ lz4


def test_lz4_writes_kafkas_frame() -> None:
    out = compress(CompressionType.LZ4, b"hello hello hello hello hello")
    # magic 184D2204 LE, FLG 0x60 (v01, independent blocks, no checksums, no size), BD 0x40, HC 0x82
    assert out[:7] == bytes.fromhex("04224d18604082")
    assert out[-4:] == b"\x00\x00\x00\x00"  # end mark, no content checksum
    assert lz4.frame.decompress(out) == b"hello hello hello hello hello"


def test_lz4_incompressible_block_is_stored_with_high_bit() -> None:
    data = random.Random(7).randbytes(1000)
    out = compress(CompressionType.LZ4, data)
    (word,) = struct.unpack_from("<I", out, 7)
    assert word == 0x80000000 | len(data)
    assert out[11 : 11 + len(data)] == data


def test_lz4_splits_64k_blocks() -> None:
    data = b"a" * (64 * 1024 * 2 + 10)
    out = compress(CompressionType.LZ4, data)
    pos, sizes = 7, []
    while True:
        word = struct.unpack_from("<I", out, pos)[0]
        pos += 4
        if word == 0:
            break
        pos += word & 0x7FFFFFFF
        sizes.append(word)
    assert len(sizes) == 3
    assert decompress(CompressionType.LZ4, out) == data


def test_lz4_v0_broken_header_checksum_written_and_tolerated() -> None:
    v0 = compress(CompressionType.LZ4, b"legacy", magic=0)
    assert v0[6] == (xxh32(v0[0:6]) >> 8) & 0xFF  # over magic + FLG + BD
    assert v0[6] != (xxh32(v0[4:6]) >> 8) & 0xFF
    assert decompress(CompressionType.LZ4, v0, magic=0) == b"legacy"
    with pytest.raises(CorruptCompressedDataError, match="Stream frame descriptor corrupted"):
        decompress(CompressionType.LZ4, v0, magic=2)


def test_lz4_broken_frame_checksum_byte_is_corrupt() -> None:
    # ProduceRequestTest.testCorruptLz4ProduceRequest: byte 6 of the frame (the HC) set to 0.
    frame = bytearray(compress(CompressionType.LZ4, b"key value"))
    frame[6] = 0
    with pytest.raises(CorruptCompressedDataError, match="Stream frame descriptor corrupted"):
        decompress(CompressionType.LZ4, bytes(frame))


def test_lz4_reads_standard_frames_with_checksums_and_content_size() -> None:
    data = b"0123456789abcdef" * 20000
    frame = lz4.frame.compress(
        data, block_linked=False, block_checksum=True, content_checksum=True, store_size=True
    )
    assert decompress(CompressionType.LZ4, frame) == data
    assert decompress(CompressionType.LZ4, frame + b"trailing bytes never read") == data


def test_lz4_checksum_mismatches_are_corrupt() -> None:
    data = b"checksummed " * 1000
    frame = bytearray(
        lz4.frame.compress(data, block_linked=False, block_checksum=True, content_checksum=True)
    )
    content = bytearray(frame)
    content[-1] ^= 0x01
    with pytest.raises(CorruptCompressedDataError):
        decompress(CompressionType.LZ4, bytes(content))
    block = bytearray(frame)
    block[-9] ^= 0x01  # last byte of the block checksum (before end mark and content checksum)
    with pytest.raises(CorruptCompressedDataError):
        decompress(CompressionType.LZ4, bytes(block))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda f: b"\x00\x00\x00\x00" + f[4:], "invalid magic"),
        (lambda f: f[:4] + bytes((f[4] & ~0x20,)) + f[5:], "Dependent block stream is unsupported"),
        (lambda f: f[:4] + bytes((f[4] | 0x01,)) + f[5:], "Reserved bits must be 0"),
        (lambda f: f[:4] + bytes(((f[4] & 0x3F) | 0x80,)) + f[5:], "Version 2 is unsupported"),
        (lambda f: f[:5] + bytes((0x30,)) + f[6:], "Block size value must be between 4 and 7"),
        (lambda f: f[:5], "Stream ended prematurely"),
        (lambda f: f[:-4], "Stream ended prematurely"),
        (lambda f: f[:-6], "Stream ended prematurely"),
    ],
)
def test_lz4_header_and_framing_errors(mutate, message: str) -> None:  # noqa: ANN001
    frame = compress(CompressionType.LZ4, b"some records " * 50)
    with pytest.raises(CorruptCompressedDataError, match=message):
        decompress(CompressionType.LZ4, mutate(frame))


def test_lz4_dependent_blocks_from_liblz4_are_rejected() -> None:
    frame = lz4.frame.compress(b"linked " * 30000, block_linked=True)
    with pytest.raises(CorruptCompressedDataError, match="Dependent block stream is unsupported"):
        decompress(CompressionType.LZ4, frame)


def test_lz4_block_larger_than_max_is_rejected() -> None:
    frame = (
        compress(CompressionType.LZ4, b"")[:7]
        + struct.pack("<I", 0x80000000 | (64 * 1024 + 1))
        + b"x" * 65537
    )
    with pytest.raises(CorruptCompressedDataError, match="Block size 65537 exceeded max: 65536"):
        decompress(CompressionType.LZ4, frame + b"\x00\x00\x00\x00")


def test_lz4_corrupt_block_payload() -> None:
    out = compress(CompressionType.LZ4, b"abcabcabc" * 1000)
    size = struct.unpack_from("<I", out, 7)[0]
    bad = out[:11] + b"\xff" * size + out[11 + size :]
    with pytest.raises(CorruptCompressedDataError):
        decompress(CompressionType.LZ4, bad)


# ------------------------------------------------------------------ zstd


def test_zstd_writes_a_frame_without_content_size_or_checksum() -> None:
    out = compress(CompressionType.ZSTD, b"zstd data " * 100)
    assert out[:4] == b"\x28\xb5\x2f\xfd"
    params = zstandard.get_frame_parameters(out)
    assert params.content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert not params.has_checksum
    assert kafka_codec.zstd_decode(out) == b"zstd data " * 100


def test_zstd_concatenated_and_skippable_frames() -> None:
    a = compress(CompressionType.ZSTD, b"one ")
    b = zstandard.ZstdCompressor(write_checksum=True).compress(b"two")
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"xyz"
    assert decompress(CompressionType.ZSTD, a + skippable + b) == b"one two"


@pytest.mark.parametrize(
    "mutate",
    [lambda f: f[:-1], lambda f: f[:6], lambda f: f + b"\x00", lambda f: f + b"garbage!", lambda f: b""],
)
def test_zstd_truncated_or_trailing_garbage_is_corrupt(mutate) -> None:  # noqa: ANN001
    frame = compress(CompressionType.ZSTD, b"zzz " * 1000)
    with pytest.raises(CorruptCompressedDataError):
        decompress(CompressionType.ZSTD, mutate(frame))


def test_zstd_corrupt_payload() -> None:
    frame = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(b"checked " * 500))
    frame[-2] ^= 0xFF
    with pytest.raises(CorruptCompressedDataError):
        decompress(CompressionType.ZSTD, bytes(frame))


# ------------------------------------------------------------------ bounded output


def _bomb(codec: CompressionType, size: int) -> bytes:
    if codec is CompressionType.GZIP:
        z = zlib.compressobj(9, zlib.DEFLATED, 31)
        chunk = bytes(1 << 20)
        return b"".join([z.compress(chunk) for _ in range(size >> 20)] + [z.flush()])
    if codec is CompressionType.ZSTD:
        cctx = zstandard.ZstdCompressor(level=1)
        chunker = cctx.chunker(size=size)
        chunk = bytes(1 << 20)
        return b"".join(b"".join(chunker.compress(chunk)) for _ in range(size >> 20)) + b"".join(
            chunker.finish()
        )
    return compress(codec, bytes(size))


@pytest.mark.parametrize("codec", COMPRESSED)
def test_decompression_bomb_is_stopped_at_max_output(codec: CompressionType) -> None:
    size = 256 * 1024 * 1024 if codec in (CompressionType.GZIP, CompressionType.ZSTD) else 32 * 1024 * 1024
    bomb = _bomb(codec, size)
    assert len(bomb) * 10 < size
    limit = 1024 * 1024
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(DecompressionLimitExceededError) as caught:
            decompress(codec, bomb, max_output=limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(caught.value, CorruptCompressedDataError)
    assert caught.value.limit == limit
    assert peak < 16 * limit
    assert time.monotonic() - started < 5


def test_raw_snappy_bomb_is_refused_from_its_length_preamble() -> None:
    bomb = bytes(cramjam.snappy.compress_raw(bytes(64 * 1024 * 1024)))
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionLimitExceededError):
            decompress(CompressionType.SNAPPY, bomb, max_output=1024 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * len(bomb)


@pytest.mark.parametrize("codec", CODECS)
def test_output_exactly_at_the_limit_is_accepted(codec: CompressionType) -> None:
    data = b"q" * 100_000
    assert decompress(codec, compress(codec, data), max_output=100_000) == data
    with pytest.raises(DecompressionLimitExceededError):
        decompress(codec, compress(codec, data), max_output=99_999)
