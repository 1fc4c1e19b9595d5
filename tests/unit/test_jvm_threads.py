"""The bench's reading of a JVM's CPU by thread kind (`tests.jvm_threads`), on a real JVM."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from embedded.local_kafka import java_executable
from tests.jvm_threads import JvmCpu, describe, jvm_cpu

# Run from source, so the JVM compiles javac's code in-process before main: its JIT threads work.
BUSY = """
public class Busy {
    public static void main(String[] args) throws Exception {
        long sum = 0;
        for (int i = 0; i < 50_000_000; i++) sum += Integer.toString(i % 1000).hashCode();
        System.out.println("ready " + sum);
        System.out.flush();
        System.in.read();
    }
}
"""


@pytest.fixture
def busy_jvm(tmp_path: Path) -> Iterator[int]:
    source = tmp_path / "Busy.java"
    source.write_text(BUSY)
    proc = subprocess.Popen([java_executable(), str(source)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_a_running_jvm_shows_its_compilers_within_its_total(busy_jvm: int) -> None:
    cpu = jvm_cpu(busy_jvm)
    assert cpu is not None
    assert 0 < cpu.jit_s < cpu.total_s


def test_no_such_process_is_none() -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert jvm_cpu(proc.pid) is None


def test_since_and_describe() -> None:
    used = JvmCpu(12.5, 3.0).since(JvmCpu(2.5, 1.0))
    assert used == JvmCpu(10.0, 2.0)
    assert describe(used, 10.0) == "Spark JVM 1.00 cores, JIT 0.20"
    assert describe(used, 0.0) == ""
