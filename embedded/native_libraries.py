"""RocksDB's JNI library unpacked once (`make jars`) for the Spark JVMs the gateway starts.

Spark's RocksDB state store loads RocksDB through `org.rocksdb.NativeLibraryLoader`. It first asks the JVM for
`lib<rocksdbjni-platform>.so` on the library path, and only without one copies the library (~15 MB, inflated
from its jar) into a new temporary file, at every JVM start. That copy is deleted at a clean exit only: every
driver or executor that is killed (kill -9, the kernel's OOM killer, a lost container) leaves its 15 MB in
/tmp for good, and every start inflates it again before the first stateful task.

`make jars` unpacks it from the rocksdbjni jar that PySpark ships into a directory named by that jar
(`.jvm/native/rocksdbjni-<version>/`), and the session puts that directory on the driver's and the executors'
library path (`spark.driver.extraLibraryPath`, `spark.executor.extraLibraryPath`: Spark's launcher adds it to
`LD_LIBRARY_PATH`, which the JVM searches first). A newer PySpark ships another jar, whose directory does not
exist until `make jars` runs again; an executor host without the directory copies the library as before.

    python -m embedded.native_libraries
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import zipfile
from pathlib import Path

from embedded.class_data_sharing import REPO_ROOT
from embedded.spark_home import SPARK_JARS_DIR

NATIVE_DIR = REPO_ROOT / ".jvm" / "native"


def rocksdb_jar(jars: Path | None = None) -> Path | None:
    """The rocksdbjni jar among `jars` (PySpark's by default), or None."""
    found = sorted((jars if jars is not None else SPARK_JARS_DIR).glob("rocksdbjni-*.jar"))
    return found[-1] if found else None


def jni_library_file(system: str | None = None, machine: str | None = None, libc: str | None = None) -> str | None:
    """The file name RocksDB's `Environment.getJniLibraryFileName` gives this platform (glibc Linux only: the
    musl builds and other systems keep RocksDB's own copying)."""
    system = system if system is not None else platform.system()
    machine = machine if machine is not None else platform.machine()
    libc = libc if libc is not None else platform.libc_ver()[0]
    if system != "Linux" or libc != "glibc":
        return None
    arch = {"x86_64": "linux64", "amd64": "linux64", "aarch64": "linux-aarch64", "ppc64le": "linux-ppc64le",
            "s390x": "linux-s390x"}.get(machine.lower())
    return f"librocksdbjni-{arch}.so" if arch else None


def library_dir(jar: Path, native_dir: Path = NATIVE_DIR) -> Path:
    """Where `jar`'s library is unpacked: a directory per jar, so that a library never meets another version's
    Java classes."""
    return native_dir / jar.name.removesuffix(".jar")


def unpacked_rocksdb_dir(jar: Path | None = None, native_dir: Path = NATIVE_DIR) -> Path | None:
    """The directory holding this platform's library of `jar` (PySpark's rocksdbjni jar by default), when
    `make jars` unpacked it; else None."""
    jar = jar if jar is not None else rocksdb_jar()
    name = jni_library_file()
    if jar is None or name is None:
        return None
    directory = library_dir(jar, native_dir)
    return directory if (directory / name).is_file() else None


def unpack_rocksdb(jar: Path, native_dir: Path = NATIVE_DIR) -> Path | None:
    """This platform's library of `jar` written to its directory (a temporary file renamed into place, so a JVM
    starting meanwhile finds the whole file or none); None where the platform has none or the jar lacks it."""
    name = jni_library_file()
    if name is None:
        return None
    directory = library_dir(jar, native_dir)
    with zipfile.ZipFile(jar) as archive:
        if name not in archive.namelist():
            return None
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=directory)
        try:
            with os.fdopen(fd, "wb") as out, archive.open(name) as source:
                while chunk := source.read(1 << 20):
                    out.write(chunk)
            os.chmod(tmp, 0o755)
            os.replace(tmp, directory / name)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return directory / name


def main() -> int:
    jar = rocksdb_jar()
    if jar is None:
        print("native libraries: no rocksdbjni jar among PySpark's jars; RocksDB copies its library at each start")
        return 0
    unpacked = unpack_rocksdb(jar)
    print(f"native libraries: {unpacked}" if unpacked else
          f"native libraries: {jar.name} has no library for this platform; RocksDB copies its own at each start")
    return 0


if __name__ == "__main__":
    sys.exit(main())
