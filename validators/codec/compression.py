"""Kafka's record-batch compression codecs, byte formats as the Java client writes and reads them.

The batch attribute's bits 0-2 name the codec, as in Kafka's `clients/.../record/CompressionType.java`,
`clients/.../compress/{Gzip,Snappy,Lz4,Zstd}Compression.java`, `Lz4BlockOutputStream.java`,
`Lz4BlockInputStream.java` (formerly `KafkaLZ4Block*Stream`), xerial `SnappyOutputStream` /
`SnappyInputStream`, zstd-jni `ZstdOutputStreamNoFinalizer` / `ZstdInputStreamNoFinalizer`.

What each codec is on the wire (the records area of a v2 batch, or a legacy wrapper's value):

* gzip   - one RFC 1952 member as `java.util.zip.GZIPOutputStream` writes it (level 6 =
           `Deflater.DEFAULT_COMPRESSION`, header `1f8b 0800 00000000 00 ff`: mtime 0, XFL 0,
           OS 255 "unknown" as JDK >= 16 writes it). Reading follows `GZIPInputStream`: concatenated
           members are read, bytes after the last member that do not start a new member are ignored.
* snappy - xerial's block framing (`SnappyOutputStream`, 32 KiB blocks): magic `82 'SNAPPY' 00`,
           int32 version 1, int32 compatible version 1 (big-endian), then `int32 length | raw snappy
           block` repeated. Reading follows `SnappyInputStream`: input that does not start with the
           8-byte magic (or is shorter than the 16-byte header) is one raw snappy block; a trailing
           fragment of fewer than 4 bytes is ignored; a repeated stream header (concatenated streams)
           is skipped.
* lz4    - the LZ4 frame format as Kafka's own `Lz4BlockOutputStream` writes it: FLG 0x60 (version
           01, independent blocks, no block/content checksum, no content size), BD 0x40 (64 KiB
           blocks), header checksum byte, blocks (`int32 LE size`, high bit = stored uncompressed),
           end mark 0. Magic v0 (legacy) messages carry the historically *broken* header checksum
           (xxh32 over magic+FLG+BD instead of FLG+BD): written that way for v0 and not checked on
           read for v0 (`ignoreFlagDescriptorChecksum`). Reading follows `Lz4BlockInputStream`:
           dependent blocks, reserved bits, a version other than 01 or a block size code outside 4-7
           are rejected, a block larger than the maximum or a missing end mark is corrupt, the
           content size field is skipped unchecked, bytes after the end mark are ignored. Block and
           content checksums are verified when flagged (per the LZ4 frame spec, by liblz4; older
           Kafka readers skipped the content checksum, Kafka's writer never sets either).
* zstd   - standard zstd frames (level 3, no checksum, no content size: zstd-jni's streaming
           writer). Reading accepts concatenated and skippable frames; a truncated frame or trailing
           bytes that are not a frame are corrupt (zstd-jni: "Truncated source" / "Unknown frame
           descriptor").

Every decoder is bounded by `max_output` (a decompression bomb raises
`DecompressionLimitExceededError` before the memory is spent) and every failure of a compressed
stream raises `CorruptCompressedDataError`, which the validator maps to CORRUPT_MESSAGE (2) as Kafka
does for a broken stream (Kafka's `Errors`, `testCorruptLz4ProduceRequest`). No I/O, no pyspark.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum
from types import ModuleType

import cramjam
import lz4.block
import lz4.frame
import xxhash
import zstandard

from validators.codec import native_inflate

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "CompressionType",
    "CorruptCompressedDataError",
    "DecompressionLimitExceededError",
    "compress",
    "decompress",
    "xxh32",
]

# Upper bound for one batch's decompressed records area unless the caller passes its own.
DEFAULT_MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024


class CompressionType(IntEnum):
    """Kafka's `CompressionType` (attribute bits 0-2): id and Kafka name (`compression.type` value)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def kafka_name(self) -> str:
        """`none`, `gzip`, `snappy`, `lz4`, `zstd` - what Kafka prints (`compresscodec`) and configures."""
        return self.name.lower()

    @classmethod
    def for_id(cls, type_id: int) -> CompressionType:
        """`CompressionType.forId`: ids 5-7 (and anything else) are
        `IllegalArgumentException("Unknown compression type id: <id>")`."""
        try:
            return cls(type_id)
        except ValueError:
            raise ValueError(f"Unknown compression type id: {type_id}") from None

    @classmethod
    def for_name(cls, name: str) -> CompressionType:
        """`CompressionType.forName`: `IllegalArgumentException("Unknown compression name: <name>")`."""
        for member in cls:
            if member.kafka_name == name:
                return member
        raise ValueError(f"Unknown compression name: {name}")


class CorruptCompressedDataError(Exception):
    """The compressed stream cannot be decoded (Kafka: the IOException of the codec stream,
    surfaced as `KafkaException("Failed to decompress record stream")`). Maps to CORRUPT_MESSAGE."""

    def __init__(self, codec: CompressionType, message: str) -> None:
        super().__init__(f"{codec.kafka_name}: {message}")
        self.codec = codec
        self.message = message


class DecompressionLimitExceededError(CorruptCompressedDataError):
    """The stream decodes to more than `max_output` bytes; raised before that memory is used.
    Kafka streams records and has no such bound - this is the gateway's bomb guard."""

    def __init__(self, codec: CompressionType, limit: int) -> None:
        super().__init__(codec, f"decompressed size exceeds the limit of {limit} bytes")
        self.limit = limit


# --------------------------------------------------------------------------------------------
# public API


def compress(codec: CompressionType | int, data: bytes, *, level: int | None = None, magic: int = 2) -> bytes:
    """Compress a records area (or a legacy inner message set) the way Kafka's Java client does.

    `level` is the codec level (`compression.<codec>.level`); None = Kafka's default.
    `magic` only matters for lz4: magic 0 writes the broken frame-descriptor checksum of old clients."""
    codec = CompressionType.for_id(int(codec))
    data = bytes(data)
    if codec is CompressionType.NONE:
        return data
    if codec is CompressionType.GZIP:
        return _gzip_compress(data, 6 if level is None else level)
    if codec is CompressionType.SNAPPY:
        return _snappy_compress(data)
    if codec is CompressionType.LZ4:
        return _lz4_compress(data, level, broken_header_checksum=magic == 0)
    return zstandard.ZstdCompressor(
        level=3 if level is None else level, write_checksum=False, write_content_size=False
    ).compress(data)


def decompress(
    codec: CompressionType | int,
    data: bytes | bytearray | memoryview,
    *,
    max_output: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    magic: int = 2,
) -> bytes:
    """Decode a compressed stream exactly as far as Kafka's reader accepts it.

    Raises `ValueError("Unknown compression type id: <id>")` for ids 5-7,
    `CorruptCompressedDataError` when the stream is broken and `DecompressionLimitExceededError`
    when it would decode to more than `max_output` bytes."""
    codec = CompressionType.for_id(int(codec))
    data = bytes(data)
    if codec is CompressionType.NONE:
        if len(data) > max_output:
            raise DecompressionLimitExceededError(codec, max_output)
        return data
    try:
        if codec is CompressionType.GZIP:
            return _gzip_decompress(data, max_output)
        if codec is CompressionType.SNAPPY:
            return _snappy_decompress(data, max_output)
        if codec is CompressionType.LZ4:
            return _lz4_decompress(data, max_output, ignore_header_checksum=magic == 0)
        return _zstd_decompress(data, max_output)
    except CorruptCompressedDataError:
        raise
    except (zlib.error, cramjam.DecompressionError, lz4.block.LZ4BlockError, zstandard.ZstdError) as e:
        raise CorruptCompressedDataError(codec, str(e)) from e


# --------------------------------------------------------------------------------------------
# gzip (GzipCompression: GZIPOutputStream / GZIPInputStream)

# JDK >= 16 GZIPOutputStream header: magic, CM=8 (deflate), FLG=0, MTIME=0, XFL=0, OS=255.
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


def _gzip_compress(data: bytes, level: int) -> bytes:
    deflater = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS, 8, zlib.Z_DEFAULT_STRATEGY)
    body = deflater.compress(data) + deflater.flush()
    return _GZIP_HEADER + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


def _gzip_decompress(data: bytes, max_output: int) -> bytes:
    codec = CompressionType.GZIP
    if len(data) < 10 or data[:2] != b"\x1f\x8b":
        # GZIPInputStream constructor: "Not in GZIP format" (or EOFException on a short stream)
        raise CorruptCompressedDataError(codec, "Not in GZIP format")
    inflate = native_inflate.NATIVE_INFLATE
    if inflate is not None:
        try:
            return _gzip_members(data, max_output, inflate)
        except inflate.error:
            pass  # zlib, the reference, reads it again: its verdict and its text
    return _gzip_members(data, max_output, zlib)


def _gzip_members(data: bytes, max_output: int, inflate: ModuleType) -> bytes:
    """Every member as `GZIPInputStream` reads them, inflated by `inflate` (zlib or ISA-L's twin)."""
    codec = CompressionType.GZIP
    out: list[bytes] = []
    total = 0
    rest = data
    while True:
        inflater = inflate.decompressobj(16 + zlib.MAX_WBITS)  # gzip wrapper only, like GZIPInputStream
        pending = rest
        while not inflater.eof:
            chunk = inflater.decompress(pending, max_output - total + 1)
            pending = inflater.unconsumed_tail
            if not chunk and not pending and not inflater.eof:
                raise CorruptCompressedDataError(codec, "Unexpected end of ZLIB input stream")
            total += len(chunk)
            if total > max_output:
                raise DecompressionLimitExceededError(codec, max_output)
            out.append(chunk)
        rest = inflater.unused_data
        # GZIPInputStream.readTrailer: more bytes after a member are read as the next member's
        # header; when that header cannot be read the bytes are ignored (end of stream).
        if len(rest) < 10 or rest[:3] != b"\x1f\x8b\x08":
            return b"".join(out)


# --------------------------------------------------------------------------------------------
# snappy (xerial SnappyOutputStream / SnappyInputStream)

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # DEFAULT_VERSION 1, MINIMUM_COMPATIBLE_VERSION 1
_XERIAL_MAGIC_HEAD = struct.unpack(">i", _XERIAL_MAGIC[:4])[0]  # SnappyCodec.MAGIC_HEADER_HEAD
_XERIAL_BLOCK_SIZE = 32 * 1024  # SnappyOutputStream.DEFAULT_BLOCK_SIZE


def _snappy_compress(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw(block: bytes, budget: int) -> bytes:
    codec = CompressionType.SNAPPY
    if not block:
        raise CorruptCompressedDataError(codec, "Cannot decompress empty stream")
    # The raw block states its uncompressed length up front: check it before allocating.
    if cramjam.snappy.decompress_raw_len(block) > budget:
        raise DecompressionLimitExceededError(codec, budget)
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decompress(data: bytes, max_output: int) -> bytes:
    codec = CompressionType.SNAPPY
    if len(data) < len(_XERIAL_HEADER) or data[:8] != _XERIAL_MAGIC:
        # SnappyInputStream.readHeader: no stream magic -> "(probably) compressed by
        # Snappy.compress(byte[])": the whole input is one raw block.
        return _snappy_raw(data, max_output)
    version = struct.unpack_from(">i", data, 8)[0]
    if version < 1:
        raise CorruptCompressedDataError(
            codec, f"Compressed with an incompatible codec version {version}. At least version 1 is required"
        )
    out: list[bytes] = []
    total = 0
    pos = len(_XERIAL_HEADER)
    end = len(data)
    while end - pos >= 4:  # hasNextChunk: fewer than 4 bytes left -> end of stream
        chunk_size = struct.unpack_from(">i", data, pos)[0]
        pos += 4
        if chunk_size == _XERIAL_MAGIC_HEAD:
            # A concatenated SnappyOutputStream: skip its header (or stop if it is not one).
            if end - pos < 12:
                raise CorruptCompressedDataError(codec, "Insufficient header size in a concatenated block")
            if data[pos - 4 : pos + 4] != _XERIAL_MAGIC:
                break
            version = struct.unpack_from(">i", data, pos + 4)[0]
            if version < 1:
                raise CorruptCompressedDataError(
                    codec,
                    f"Compressed with an incompatible codec version {version}. At least version 1 is required",
                )
            pos += 12
            continue
        if chunk_size < 0:
            raise CorruptCompressedDataError(codec, f"chunkSize is too big or negative : {chunk_size}")
        if end - pos < chunk_size:
            raise CorruptCompressedDataError(codec, "failed to read chunk")
        try:
            block = _snappy_raw(data[pos : pos + chunk_size], max_output - total)
        except DecompressionLimitExceededError:
            raise DecompressionLimitExceededError(codec, max_output) from None
        pos += chunk_size
        total += len(block)
        out.append(block)
    return b"".join(out)


# --------------------------------------------------------------------------------------------
# lz4 (Lz4BlockOutputStream / Lz4BlockInputStream, LZ4 frame format v1.5.1)

_LZ4_MAGIC = 0x184D2204
_LZ4_MAGIC_BYTES = struct.pack("<I", _LZ4_MAGIC)
_LZ4_FLG = 0x60  # version 01, block independence, no checksums, no content size
_LZ4_BD = 0x40  # BLOCKSIZE_64KB (4)
_LZ4_BLOCK_SIZE = 64 * 1024
_LZ4_INCOMPRESSIBLE = 0x80000000
_LZ4_DEFAULT_LEVEL = 9  # CompressionType.LZ4.defaultLevel(): uses lz4-java's fast compressor


def xxh32(data: bytes | bytearray | memoryview, seed: int = 0) -> int:
    """XXH32 (the LZ4 frame checksum), from the maintained native `xxhash` package."""
    return xxhash.xxh32_intdigest(bytes(data), seed)


def _lz4_header_checksum(descriptor: bytes) -> int:
    return (xxh32(descriptor) >> 8) & 0xFF


def _lz4_compress(data: bytes, level: int | None, *, broken_header_checksum: bool) -> bytes:
    header = _LZ4_MAGIC_BYTES + bytes((_LZ4_FLG, _LZ4_BD))
    # Lz4BlockOutputStream.writeHeader: the checksum covers FLG+BD; the v0 variant covers magic too.
    hc = _lz4_header_checksum(header if broken_header_checksum else header[4:])
    parts = [header, bytes((hc,))]
    high = level is not None and level != _LZ4_DEFAULT_LEVEL
    view = memoryview(data)
    for start in range(0, len(data), _LZ4_BLOCK_SIZE):
        chunk = view[start : start + _LZ4_BLOCK_SIZE]
        if high:
            block = lz4.block.compress(chunk, mode="high_compression", compression=level, store_size=False)
        else:
            block = lz4.block.compress(chunk, mode="default", store_size=False)
        if len(block) >= len(chunk):  # writeBlock: incompressible -> stored
            parts.append(struct.pack("<I", len(chunk) | _LZ4_INCOMPRESSIBLE))
            parts.append(bytes(chunk))
        else:
            parts.append(struct.pack("<I", len(block)))
            parts.append(block)
    parts.append(b"\x00\x00\x00\x00")  # writeEndMark (no content checksum)
    return b"".join(parts)


def _lz4_decompress(data: bytes, max_output: int, *, ignore_header_checksum: bool) -> bytes:
    codec = CompressionType.LZ4

    def corrupt(message: str) -> CorruptCompressedDataError:
        return CorruptCompressedDataError(codec, message)

    end = len(data)
    # Lz4BlockInputStream.readHeader (FLG/BD validation as KafkaLZ4BlockOutputStream.FLG/BD.validate)
    if end < 6:
        raise corrupt("Stream ended prematurely")
    if data[:4] != _LZ4_MAGIC_BYTES:
        raise corrupt("Stream unsupported (invalid magic bytes)")
    flg = data[4]
    bd = data[5]
    if flg & 0x03:
        raise corrupt("Reserved bits must be 0")
    if not flg & 0x20:
        raise corrupt("Dependent block stream is unsupported")
    if flg >> 6 != 1:
        raise corrupt(f"Version {flg >> 6} is unsupported")
    if bd & 0x0F:
        raise corrupt("Reserved2 field must be 0")
    if not 4 <= (bd >> 4) & 0x07 <= 7:
        raise corrupt("Block size value must be between 4 and 7")
    if bd & 0x80:
        raise corrupt("Reserved3 field must be 0")
    block_checksum = bool(flg & 0x10)
    max_block_size = 1 << (2 * ((bd >> 4) & 0x07) + 8)
    pos = 6
    if flg & 0x08:  # content size: skipped, never checked
        if end - pos < 8:
            raise corrupt("Stream ended prematurely")
        pos += 8
    if pos >= end:
        raise corrupt("Stream ended prematurely")
    if not ignore_header_checksum and data[pos] != _lz4_header_checksum(data[4:pos]):
        raise corrupt("Stream frame descriptor corrupted")
    pos += 1
    blocks_start = pos
    # readBlock, structure only: sizes, truncation, end mark.
    while True:
        if end - pos < 4:
            raise corrupt("Stream ended prematurely")
        block_size = struct.unpack_from("<I", data, pos)[0] & ~_LZ4_INCOMPRESSIBLE
        pos += 4
        if block_size == 0:  # end mark
            if flg & 0x04:  # content checksum
                if end - pos < 4:
                    raise corrupt("Stream ended prematurely")
                pos += 4
            break
        if block_size > max_block_size:
            raise corrupt(f"Block size {block_size} exceeded max: {max_block_size}")
        pos += block_size + (4 if block_checksum else 0)
        if pos > end:
            raise corrupt("Stream ended prematurely")
    # Bytes after the end mark are never read by Kafka. The blocks are decoded (and block/content
    # checksums verified) by liblz4 behind a normalised descriptor: content size dropped (Kafka
    # never checks it) and a correct header checksum (v0 frames carry the broken one).
    descriptor = bytes((flg & ~0x08, bd))
    frame = (
        _LZ4_MAGIC_BYTES + descriptor + bytes((_lz4_header_checksum(descriptor),)) + data[blocks_start:pos]
    )
    decompressor = lz4.frame.LZ4FrameDecompressor()
    try:
        out = decompressor.decompress(frame, max_length=max_output + 1)
    except RuntimeError as e:  # python-lz4 reports LZ4F errors as RuntimeError
        raise corrupt(str(e)) from e
    if len(out) > max_output:
        raise DecompressionLimitExceededError(codec, max_output)
    if not decompressor.eof:
        raise corrupt("Stream ended prematurely")
    return out


# --------------------------------------------------------------------------------------------
# zstd (ZstdInputStreamNoFinalizer)

_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 * 1024
_ZSTD_READ = 256 * 1024


def _zstd_frames_end(data: bytes) -> None:
    """Walk the frame structure (headers and block headers only) so a truncated frame or trailing
    garbage is rejected before decoding: python-zstandard's reader stops silently on both."""
    codec = CompressionType.ZSTD
    end = len(data)
    pos = 0
    if end == 0:
        raise CorruptCompressedDataError(codec, "Truncated source")
    while pos < end:
        if end - pos < 4:
            raise CorruptCompressedDataError(codec, "Unknown frame descriptor")
        magic = struct.unpack_from("<I", data, pos)[0]
        pos += 4
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame
            if end - pos < 4:
                raise CorruptCompressedDataError(codec, "Truncated source")
            size = struct.unpack_from("<I", data, pos)[0]
            pos += 4 + size
            if pos > end:
                raise CorruptCompressedDataError(codec, "Truncated source")
            continue
        if magic != _ZSTD_MAGIC:
            raise CorruptCompressedDataError(codec, "Unknown frame descriptor")
        if pos >= end:
            raise CorruptCompressedDataError(codec, "Truncated source")
        fhd = data[pos]
        pos += 1
        if fhd & 0x08:
            raise CorruptCompressedDataError(codec, "Unsupported frame parameter")
        single_segment = bool(fhd & 0x20)
        fcs_flag = fhd >> 6
        pos += (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 0x03]
        pos += (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
        while True:
            if end - pos < 3:
                raise CorruptCompressedDataError(codec, "Truncated source")
            block_header = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16)
            pos += 3
            block_type = (block_header >> 1) & 0x03
            block_size = block_header >> 3
            if block_type == 3:
                raise CorruptCompressedDataError(codec, "Corrupted block detected")
            pos += 1 if block_type == 1 else block_size
            if pos > end:
                raise CorruptCompressedDataError(codec, "Truncated source")
            if block_header & 0x01:  # last block
                break
        if fhd & 0x04:  # content checksum
            pos += 4
            if pos > end:
                raise CorruptCompressedDataError(codec, "Truncated source")


def _zstd_decompress(data: bytes, max_output: int) -> bytes:
    codec = CompressionType.ZSTD
    _zstd_frames_end(data)
    out: list[bytes] = []
    total = 0
    # zstd-jni accepts windows up to 2^27 (ZSTD_WINDOWLOG_LIMIT_DEFAULT); a window larger than both
    # 8 MiB (what level-19 writers declare) and the output bound cannot be needed, so the decoder's
    # own allocation stays bounded too.
    window = min(1 << 27, max(1 << 23, 1 << max(0, max_output - 1).bit_length()))
    with zstandard.ZstdDecompressor(max_window_size=window).stream_reader(
        data, read_across_frames=True
    ) as reader:
        while True:
            chunk = reader.read(min(_ZSTD_READ, max_output - total + 1))
            if not chunk:
                return b"".join(out)
            total += len(chunk)
            if total > max_output:
                raise DecompressionLimitExceededError(codec, max_output)
            out.append(chunk)
