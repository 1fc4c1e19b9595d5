"""RocksDB's JNI library unpacked once for Spark's JVMs (embedded/native_libraries.py)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from embedded import native_libraries
from embedded.native_libraries import (
    jni_library_file,
    library_dir,
    rocksdb_jar,
    unpack_rocksdb,
    unpacked_rocksdb_dir,
)


@pytest.mark.parametrize(("system", "machine", "libc", "name"), [
    ("Linux", "x86_64", "glibc", "librocksdbjni-linux64.so"),
    ("Linux", "aarch64", "glibc", "librocksdbjni-linux-aarch64.so"),
    ("Linux", "ppc64le", "glibc", "librocksdbjni-linux-ppc64le.so"),
    ("Linux", "x86_64", "", None),  # musl: RocksDB's own copying
    ("Linux", "riscv64", "glibc", None),
    ("Darwin", "arm64", "", None),
])
def test_the_library_file_rocksdb_asks_for_on_each_platform(system: str, machine: str, libc: str,
                                                              name: str | None) -> None:
    assert jni_library_file(system, machine, libc) == name


def _jar(path: Path, entries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as jar:
        for name, data in entries.items():
            jar.writestr(name, data)
    return path


def test_the_library_is_unpacked_into_a_directory_named_by_its_jar(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_libraries, "jni_library_file", lambda: "librocksdbjni-linux64.so")
    library = bytes(range(256)) * 5000
    jar = _jar(tmp_path / "rocksdbjni-9.8.4.jar", {"librocksdbjni-linux64.so": library,
                                                   "librocksdbjni-linux64-musl.so": b"other",
                                                   "org/rocksdb/RocksDB.class": b"\xca\xfe"})
    native = tmp_path / "native"
    assert unpacked_rocksdb_dir(jar, native) is None  # not yet unpacked

    unpacked = unpack_rocksdb(jar, native)

    assert unpacked == native / "rocksdbjni-9.8.4" / "librocksdbjni-linux64.so"
    assert unpacked.read_bytes() == library
    assert unpacked.stat().st_mode & 0o111  # the dynamic loader maps it executable
    assert sorted(p.name for p in unpacked.parent.iterdir()) == ["librocksdbjni-linux64.so"]  # no temporary left
    assert unpacked_rocksdb_dir(jar, native) == library_dir(jar, native)
    # another version's jar has a directory of its own, empty until unpacked
    assert unpacked_rocksdb_dir(tmp_path / "rocksdbjni-10.0.0.jar", native) is None


def test_a_jar_without_this_platforms_library_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_libraries, "jni_library_file", lambda: "librocksdbjni-linux64.so")
    jar = _jar(tmp_path / "rocksdbjni-9.8.4.jar", {"librocksdbjni-osx-arm64.jnilib": b"x"})
    assert unpack_rocksdb(jar, tmp_path / "native") is None
    assert not (tmp_path / "native").exists()


def test_the_rocksdb_jar_is_found_among_the_jars(tmp_path: Path) -> None:
    assert rocksdb_jar(tmp_path) is None
    _jar(tmp_path / "spark-core_2.13-4.2.0.jar", {})
    jar = _jar(tmp_path / "rocksdbjni-9.8.4.jar", {})
    assert rocksdb_jar(tmp_path) == jar
