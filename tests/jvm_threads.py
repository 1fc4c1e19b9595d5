"""CPU time of a JVM's threads, split into its JIT compilers and the rest, read from Linux's /proc.

A freshly started JVM compiles for minutes. On the 2-core machine, HotSpot's C1 and C2 compiler threads
took 0.63 of a core in Spark's JVM a minute after the gateway started, and still 0.2 after eight
minutes (`make bench`'s clients section, 2026-11-26). The front door's round trip is mostly that JVM's
work, so a bench row measured while it compiles says as much about warm-up as about the gateway.
`make bench` prints each front-door row's share beside its figures.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_COMPILER_THREAD = "CompilerThre"  # HotSpot names them "C1 CompilerThread0", cut to 15 chars in `comm`


@dataclass(frozen=True)
class JvmCpu:
    """CPU seconds a JVM used up to a moment: all of its threads, and its JIT compiler threads."""

    total_s: float
    jit_s: float

    def since(self, earlier: JvmCpu) -> JvmCpu:
        return JvmCpu(self.total_s - earlier.total_s, self.jit_s - earlier.jit_s)


def cpu_seconds(stat: str) -> float:
    """A /proc `stat` line's user and system CPU seconds (a process's or one thread's)."""
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


def jvm_cpu(pid: int) -> JvmCpu | None:
    """The JVM's CPU so far, or None where /proc does not show it (another OS, a process gone)."""
    process = Path(f"/proc/{pid}")
    try:
        total = cpu_seconds((process / "stat").read_text())  # the process's, ended threads included
        threads = list((process / "task").iterdir())
    except (OSError, IndexError, ValueError):
        return None
    jit = 0.0
    for thread in threads:
        try:
            if _COMPILER_THREAD in (thread / "comm").read_text():
                jit += cpu_seconds((thread / "stat").read_text())
        except (OSError, IndexError, ValueError):
            continue  # the thread ended between the listing and the read
    return JvmCpu(total, jit)


def describe(used: JvmCpu, seconds: float) -> str:
    """`used` over `seconds` of wall time as cores, for a bench row's note."""
    if seconds <= 0:
        return ""
    return f"Spark JVM {used.total_s / seconds:.2f} cores, JIT {used.jit_s / seconds:.2f}"
