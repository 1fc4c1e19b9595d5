"""zlib-ng's inflate against zlib, the reference: the same verdict and the same bytes on every stream.

The gzip reader (`compression.decompress`) runs with zlib-ng and with zlib alone on valid streams,
concatenated members, trailing bytes, every truncation, mutated bytes (header, deflate body, trailer) and
output limits at the exact size; raw deflate bodies with flipped bits go to both inflaters directly,
because a stream zlib-ng accepted and zlib (Java's `Inflater`) refused would put a batch in storage that
Kafka's consumers cannot read.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator

import pytest

from validators.codec import native_inflate
from validators.codec.compression import CompressionType, compress, decompress

native = native_inflate.NATIVE_INFLATE


def test_zlib_ng_is_installed_and_used() -> None:
    # a dependency of the project: a missing package would silently leave the slow path
    assert native is not None
    assert native.__name__ == "zlib_ng.zlib_ng"


def _outcome(data: bytes, max_output: int, inflate: object | None) -> tuple[str, bytes | str]:
    saved = native_inflate.NATIVE_INFLATE
    native_inflate.NATIVE_INFLATE = inflate
    try:
        return "ok", decompress(CompressionType.GZIP, data, max_output=max_output)
    except Exception as e:  # noqa: BLE001 - the type and text are what is compared
        return type(e).__name__, str(e)
    finally:
        native_inflate.NATIVE_INFLATE = saved


def _raw(rng: random.Random, size: int, kind: str) -> bytes:
    if kind == "text":
        return bytes(rng.choice(b"abcdefgh ") for _ in range(size))
    if kind == "random":
        return rng.randbytes(size)
    return bytes(rng.choice(b"ab") if rng.random() < 0.9 else rng.randrange(256) for _ in range(size))


def _gzip_cases(rng: random.Random) -> Iterator[tuple[bytes, int]]:
    big = 1 << 26
    for size in (0, 1, 300, 5000, 70000):
        raw = _raw(rng, size, "text")
        for level in (1, 6, 9):
            g = compress(CompressionType.GZIP, raw, level=level)
            yield from ((case, big) for case in (g, g + g, g + b"junk", g + b"\x1f\x8b", g + b"\x1f\x8b\x08" + b"x" * 20))
            yield from ((g[:cut], big) for cut in range(0, len(g), max(1, len(g) // 60)))
            yield from ((g, limit) for limit in {0, max(0, size - 1), size, size + 1})
            for i in range(1, 9):  # the trailer: CRC-32 and ISIZE
                d = bytearray(g)
                d[-i] ^= 0x55
                yield bytes(d), big
            for _ in range(150):
                d = bytearray(g)
                for _ in range(rng.randint(1, 3)):
                    d[rng.randrange(len(d))] = rng.randrange(256)
                yield bytes(d), big


def test_gzip_reader_same_verdict_and_bytes_with_and_without_zlib_ng() -> None:
    assert native is not None
    cases = list(_gzip_cases(random.Random(7)))
    differing = [(d[:24].hex(), m) for d, m in cases if _outcome(d, m, native) != _outcome(d, m, None)]
    assert len(cases) > 3000
    assert differing == []


@pytest.mark.parametrize("kind", ["text", "mixed", "random"])
def test_raw_inflate_accepts_exactly_what_zlib_accepts(kind: str) -> None:
    assert native is not None
    rng = random.Random(kind)

    def inflate(module: object, data: bytes) -> tuple[str, bytes, bytes]:
        d = module.decompressobj(-15)  # type: ignore[attr-defined]
        try:
            out = d.decompress(data)
        except (zlib.error, native.error):
            return "error", b"", b""
        return ("end" if d.eof else "short"), out, d.unused_data

    refused = 0
    for size in (300, 5000):
        raw = _raw(rng, size, kind)
        for level in (1, 9):
            deflater = zlib.compressobj(level, zlib.DEFLATED, -15)
            body = deflater.compress(raw) + deflater.flush()
            for _ in range(700):
                d = bytearray(body)
                for _ in range(rng.randint(1, 4)):
                    d[rng.randrange(len(d))] ^= 1 << rng.randrange(8)
                reference = inflate(zlib, bytes(d))
                assert inflate(native, bytes(d)) == reference
                refused += reference[0] == "error"
    assert refused > 20  # the mutations reach the inflaters' error paths, not only valid streams
