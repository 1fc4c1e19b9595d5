"""The native record walk (validators/codec/_record_walk.c) against its pure-Python reference.

`log_validator._walk_py` (records.scan_records + `validateRecord` per record) is the reference; the
native `_record_walk.walk` must return exactly the same tuple — structural error text, max timestamp,
KIP-937 future count, offset contiguity and per-record errors — for valid, mutated and truncated
records areas, every window (Java long wrap-around included) and both timestamp types. The whole
decision is also compared with the pure-Python fallback (cheap walkers + full walk).
"""

from __future__ import annotations

import struct
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from validators import record_walks as lv
from validators.append_result import PartitionState
from validators.codec import native_walk
from validators.log_validator import validate_and_assign
from validators.topic_config import topic_config

native = pytest.importorskip("validators.codec._record_walk")

NOW = 1_700_000_000_000
HOUR = 3_600_000
LONG_MIN = -(1 << 63)
LONG_MAX = (1 << 63) - 1


def zigzag_leb128(value: int, bits: int, pad: int = 0) -> bytes:
    """Zigzag LEB128 (ByteUtils.writeVarint/Varlong); `pad` extra continuation bytes make an
    overlong (still legal up to 5 / 10 bytes) encoding of the same value."""
    u = ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    for _ in range(pad):
        out[-1] |= 0x80
        out.append(0)
    return bytes(out)


def varint(value: int, pad: int = 0) -> bytes:
    return zigzag_leb128(value, 32, pad)


def varlong(value: int, pad: int = 0) -> bytes:
    return zigzag_leb128(value, 64, pad)


# one record: (timestamp delta, offset delta, key, value, headers, size adjustment, varint padding)
_fields = st.tuples(
    st.one_of(st.integers(-(1 << 14), 1 << 14), st.integers(LONG_MIN, LONG_MAX)),
    st.one_of(st.none(), st.integers(-3, 3), st.integers(-(1 << 31), (1 << 31) - 1)),
    st.one_of(st.none(), st.binary(max_size=40), st.sampled_from([-1, -5])),
    st.one_of(st.none(), st.binary(max_size=300), st.sampled_from([-1, -7])),
    st.lists(st.tuples(st.binary(max_size=6), st.one_of(st.none(), st.binary(max_size=6))), max_size=3),
    st.sampled_from([0, 0, 0, 0, 1, -1]),
    st.sampled_from([0, 0, 0, 1, 3]),
)


def encode(index: int, fields: tuple) -> bytes:
    td, od, key, value, headers, size_adjust, pad = fields
    body = b"\x00" + varlong(td, pad) + varint(index if od is None else od, pad)
    for field in (key, value):
        if field is None:
            body += varint(-1, pad)
        elif isinstance(field, int):  # a negative length other than -1: null too
            body += varint(field)
        else:
            body += varint(len(field), pad) + field
    body += varint(len(headers), pad)
    for hk, hv in headers:
        body += varint(len(hk)) + hk + (varint(-1) if hv is None else varint(len(hv)) + hv)
    return varint(len(body) + size_adjust, pad) + body


_mutation = st.one_of(
    st.none(),
    st.tuples(st.just("set"), st.integers(0, 1 << 16), st.integers(0, 255)),
    st.tuples(st.just("cut"), st.integers(0, 1 << 16), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 1 << 16), st.integers(0, 255)),
)

_timestamps = st.one_of(
    st.integers(NOW - 2 * HOUR, NOW + 2 * HOUR),
    st.sampled_from([-1, 0, LONG_MIN, LONG_MAX, NOW - LONG_MAX, NOW + HOUR, NOW + HOUR + 1]),
    st.integers(LONG_MIN, LONG_MAX),
)
_windows = st.sampled_from([0, 1000, HOUR, 2 * HOUR, LONG_MAX])


def mutate(area: bytes, mutation: tuple | None) -> bytes:
    if mutation is None or not area:
        return area
    what, at, byte = mutation
    at %= len(area)
    if what == "set":
        return area[:at] + bytes((byte,)) + area[at + 1 :]
    if what == "cut":
        return area[:at]
    return area[:at] + bytes((byte,)) + area[at:]


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(_fields, max_size=8),
    mutation=_mutation,
    count_delta=st.sampled_from([0, 0, 0, 1, -1, -100]),
    prefix=st.binary(max_size=3),
    suffix=st.binary(max_size=3),
    base=_timestamps,
    batch_lat=st.booleans(),
    lat_timestamp=_timestamps,
    check_timestamps=st.booleans(),
    now=st.one_of(st.just(NOW), st.sampled_from([LONG_MIN, LONG_MAX, 0, -1])),
    before=_windows,
    after=_windows,
    compacted=st.booleans(),
    kind=st.sampled_from([bytes, bytearray, memoryview]),
)
def test_native_walk_equals_the_reference(records: list, mutation: tuple | None, count_delta: int, prefix: bytes,
                                          suffix: bytes, base: int, batch_lat: bool, lat_timestamp: int,
                                          check_timestamps: bool, now: int, before: int, after: int,
                                          compacted: bool, kind: type) -> None:
    area = mutate(b"".join(encode(i, r) for i, r in enumerate(records)), mutation)
    buf = prefix + area + suffix
    start, end = len(prefix), len(prefix) + len(area)
    count = len(records) + count_delta
    args = (start, end, count, base, batch_lat, lat_timestamp, check_timestamps, now, before, after, compacted)
    expected = lv._walk_py(buf, *args)
    assert native.walk(kind(buf), *args) == expected


def test_structural_error_texts_are_kafkas() -> None:
    ok = encode(0, (0, None, b"k", b"v", [], 0, 0))

    def error(area: bytes, count: int = 1) -> str | None:
        result = native.walk(area, 0, len(area), count, NOW, False, -1, True, NOW, LONG_MAX, HOUR, False)
        assert result[0] == lv._walk_py(area, 0, len(area), count, NOW, False, -1, True, NOW, LONG_MAX, HOUR, False)[0]
        return result[0]

    assert error(ok) is None
    assert error(ok, 2) == "Incorrect declared batch size, premature EOF reached"
    assert error(ok + ok, 1) == "Incorrect declared batch size, records still remaining in file"
    assert error(ok, -1) == "Found invalid record count -1 in magic v2 batch"
    assert error(b"\xff\xff\xff\xff\xff\x01") == (
        "Varint is too long, the most significant bit in the 5th byte is set, converted value: ffffffff")
    assert error(varint(100) + ok[1:]) == (
        "Invalid record size: expected 100 bytes in record payload, but instead the buffer has only 8 remaining bytes.")
    assert error(encode(0, (0, None, b"k", b"v", [], -1, 0)) + b"\x00") == (
        "Invalid record size: expected to read 7 bytes in record payload, but instead read 8")
    body = b"\x00\x00\x00\x02k\x02v" + varint(-2)
    assert error(varint(len(body)) + body) == "Found invalid number of record headers -2"
    body = b"\x00\x00\x00\x02k\x02v" + varint(5)
    assert error(varint(len(body)) + body) == (
        "Found invalid number of record headers. 5 is larger than the remaining size of the buffer")
    body = b"\x00\x00\x00\x02k\x02v" + varint(1) + b"\x00"  # 1 header, 1 byte left: not "larger", but short
    assert error(varint(len(body)) + body) == "Found invalid record structure"
    body = b"\x00\x00\x00\x02k\x02v\x02" + varint(-3) + b"\x00\x00"
    assert error(varint(len(body)) + body) == "Invalid negative header key size -3"
    body = b"\x00" + b"\xff" * 10 + b"\x01\x00\x02k\x02v\x00"  # overlong timestamp varlong
    assert error(varint(len(body)) + body) == "Found invalid record structure"
    body = b"\x00\x00\x00" + varint(50) + b"k"  # key past the end
    assert error(varint(len(body)) + body) == "Found invalid record structure"


def test_record_errors_and_results() -> None:
    area = b"".join(encode(i, r) for i, r in enumerate([
        (0, None, None, b"v", [], 0, 0),  # null key
        (5 * HOUR, None, b"k", None, [], 0, 0),  # too far ahead
        (-1 - NOW, None, b"k", b"vv", [], 0, 0),  # ts -1: exempt
        (2, 7, b"", b"", [(b"h", None)], 0, 0),  # ok, offset 7
    ]))
    args = (0, len(area), 4, NOW, False, -1, True, NOW, LONG_MAX, HOUR, True)
    result = native.walk(area, *args)
    assert result == (None, NOW + 2, 0, False, [(0, 1, 0, NOW, -1, 1), (1, 2, 1, NOW + 5 * HOUR, 1, -1)])
    assert result == lv._walk_py(area, *args)
    # a LogAppendTime flag: every record reads the header maxTimestamp, -1 falls into the LAT branch
    lat = native.walk(area, 0, len(area), 4, NOW, True, -1, True, NOW, LONG_MAX, HOUR, False)
    assert [e[:2] for e in lat[4]] == [(0, 3), (1, 3), (2, 3), (3, 3)]
    assert lat == lv._walk_py(area, 0, len(area), 4, NOW, True, -1, True, NOW, LONG_MAX, HOUR, False)
    # KIP-937 future count with a wide window
    wide = native.walk(area, 0, len(area), 4, NOW, False, -1, True, NOW, LONG_MAX, LONG_MAX, False)
    assert wide == (None, NOW + 5 * HOUR, 1, False, []) == lv._walk_py(area, 0, len(area), 4, NOW, False, -1, True,
                                                                       NOW, LONG_MAX, LONG_MAX, False)


@pytest.mark.parametrize("now", [NOW, 0, -1, LONG_MIN, LONG_MAX])
@pytest.mark.parametrize("before", [0, 1000, HOUR, LONG_MAX])
@pytest.mark.parametrize("after", [0, 1000, HOUR, 2 * HOUR, LONG_MAX])
def test_window_and_future_boundaries(now: int, before: int, after: int) -> None:
    """Every record on, just inside and just outside both window edges (inclusive, Java long
    arithmetic: edges wrap) and KIP-937's one-hour threshold."""
    def wrap(v: int) -> int:
        return ((v - LONG_MIN) % (1 << 64)) + LONG_MIN

    edges = [now - before, now + after, now + HOUR, -1, 0, LONG_MIN, LONG_MAX]
    stamps = [wrap(e + k) for e in edges for k in (-1, 0, 1)]
    for base in (now, stamps[0], 0):
        area = b"".join(encode(i, (wrap(ts - base), None, b"k", b"v", [], 0, 0)) for i, ts in enumerate(stamps))
        for check_timestamps in (True, False):
            args = (0, len(area), len(stamps), base, False, -1, check_timestamps, now, before, after, False)
            assert native.walk(area, *args) == lv._walk_py(area, *args)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        native.walk(b"abc", 2, 1, 1, NOW, False, -1, True, NOW, 0, 0, False)
    with pytest.raises(ValueError):
        native.walk(b"abc", 0, 4, 1, NOW, False, -1, True, NOW, 0, 0, False)
    with pytest.raises(TypeError):
        native.walk("text", 0, 1, 1, NOW, False, -1, True, NOW, 0, 0, False)
    with pytest.raises(OverflowError):
        native.walk(b"abc", 0, 1, 1, 1 << 63, False, -1, True, NOW, 0, 0, False)


# ---- the whole decision: native walk vs the pure-Python fallback ----------------------------------------


def batch(area: bytes, count: int, base_ts: int, max_ts: int, attributes: int) -> bytes:
    header = struct.pack(">qiibIhiqqqhii", 0, 49 + len(area), -1, 2, 0, attributes, count - 1, base_ts, max_ts,
                         -1, -1, -1, count)
    out = bytearray(header + area)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(_fields, min_size=1, max_size=6),
    mutation=_mutation,
    count_delta=st.sampled_from([0, 0, 0, 1, -1]),
    base=_timestamps,
    max_ts=_timestamps,
    lat_flag=st.booleans(),
    gzip=st.booleans(),
    configs=st.fixed_dictionaries({
        "message.timestamp.type": st.sampled_from(["CreateTime", "LogAppendTime"]),
        "cleanup.policy": st.sampled_from(["delete", "compact"]),
        "message.timestamp.before.max.ms": _windows,
        "message.timestamp.after.max.ms": _windows,
        "compression.type": st.sampled_from(["producer", "producer", "uncompressed", "gzip"]),
    }),
)
def test_decisions_equal_the_pure_python_fallback(records: list, mutation: tuple | None, count_delta: int,
                                                  base: int, max_ts: int, lat_flag: bool, gzip: bool,
                                                  configs: dict) -> None:
    from validators.codec.compression import compress

    area = mutate(b"".join(encode(i, r) for i, r in enumerate(records)), mutation)
    count = max(len(records) + count_delta, 1)
    attributes = (0x08 if lat_flag else 0) | (1 if gzip else 0)
    data = batch(compress(1, area) if gzip else area, count, base, max_ts, attributes)
    config = topic_config("t", 1, configs, {})
    with_native = validate_and_assign(data, "t", 0, config, PartitionState(), NOW)
    try:
        native_walk.NATIVE_WALK = None
        fallback = validate_and_assign(data, "t", 0, config, PartitionState(), NOW)
    finally:
        native_walk.NATIVE_WALK = native
    assert with_native == fallback


def test_the_validator_uses_the_native_walk() -> None:
    assert native_walk.NATIVE_WALK is native


# ---- Spark cluster mode: the package zip carries the shared object ------------------------------------


def _import_from_zip(archive: Path) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter without site (so without the editable install) importing from the zip."""
    code = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
        "import validators, validators.log_validator, validators.codec.native_walk as native_walk\n"
        "print(type(validators.__loader__).__name__, native_walk.NATIVE_WALK is not None)\n"
        "print(native_walk.NATIVE_WALK.walk(b'\\x10\\x00\\x00\\x00\\x02k\\x02v\\x00', 0, 9, 1, 5, False, -1, True, 5, 0, 0, False)"
        " if native_walk.NATIVE_WALK else None)\n"
        "import sinks, sinks.responses as responses\n"
        "print(type(sinks.__loader__).__name__, responses.NATIVE_RESPONSES is not None)\n"
    )
    return subprocess.run([sys.executable, "-S", "-c", code, str(archive), sysconfig.get_paths()["purelib"]],
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_package_zip_loads_the_native_walk(tmp_path: Path) -> None:
    from streaming.session import package_zip

    archive = package_zip(tmp_path / "pyfiles")
    # named by content: another start of the same code reuses the file, nothing accumulates
    assert package_zip(tmp_path / "pyfiles") == archive
    assert [p.name for p in (tmp_path / "pyfiles").iterdir()] == [archive.name]
    _check_package_zip(archive, tmp_path)


def _check_package_zip(archive: Path, tmp_path: Path) -> None:
    names = zipfile.ZipFile(archive).namelist()
    assert any(n.startswith("validators/codec/_record_walk") and n.endswith(".so") for n in names)
    assert any(n.startswith("sinks/_response_avro") and n.endswith(".so") for n in names)
    assert any(n.startswith("storage/_batched_calls") and n.endswith(".so") for n in names)
    # the response schema travels as a package resource and is read from inside the zip
    assert "contract/produce_response.avsc" in names
    code = ("import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
            "import contract, contract.responses as r\n"
            "print(type(contract.__loader__).__name__, r.decode_response(r.encode_response({'request_id': 'x', "
            "'client_id': None, 'topic': 't', 'partition': 0, 'error_code': 0, 'error_name': None, "
            "'error_message': None, 'base_offset': 5, 'log_append_time_ms': -1, 'log_start_offset': 0, "
            "'record_errors': [], 'record_count': 1, 'ingress_partition': 0, 'ingress_offset': 1}))['base_offset'])\n")
    run = subprocess.run([sys.executable, "-S", "-c", code, str(archive), sysconfig.get_paths()["purelib"]],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["zipimporter", "5"]
    run = _import_from_zip(archive)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["zipimporter True", "(None, 5, 0, True, [])", "zipimporter True"]
    assert "not available" not in run.stderr

    # without the shared object: the pure-Python walk, and one warning
    stripped = tmp_path / "no-native.zip"
    with zipfile.ZipFile(archive) as src, zipfile.ZipFile(stripped, "w") as dst:
        for name in src.namelist():
            if not name.endswith(".so"):
                dst.writestr(name, src.read(name))
    run = _import_from_zip(stripped)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["zipimporter False", "None", "zipimporter False"]
    assert run.stderr.count("validators.codec._record_walk is not available") == 1
    assert run.stderr.count("sinks._response_avro is not available") == 1
