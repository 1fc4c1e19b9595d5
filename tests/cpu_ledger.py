"""Where a bench row's CPU went, machine-wide: the Spark JVM, its Python workers, the broker, the bench's own
process (the Spark driver's Python and the front door), the clients it ran and reaped, and the rest.

A row through the front door shares the 2 cores with its producer, the front door and the broker's ingress
hop; the gateway's backlog has them to itself. Per record, the ledger says whether a front-door row was
bound by CPU (the machine busy, each record costing the sum of every role's share) or by the round trip
(cores left idle), and which role the gap to the backlog is made of. Read from Linux's /proc.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class CpuLedger:
    """CPU seconds used up to a moment, by role; `busy` is the whole machine's (all cores)."""

    spark_jvm: float
    python_workers: float  # the Spark JVM's descendants, the ones already reaped included
    broker: float
    bench: float  # this process: the driver's Python, the front door and its librdkafka threads
    clients: float  # this process's children it has waited for: the producers of each row
    door: float  # a `gateway door` process of the row's, where it has one
    busy: float

    def since(self, earlier: CpuLedger) -> CpuLedger:
        return CpuLedger(*(getattr(self, f.name) - getattr(earlier, f.name) for f in fields(self)))

    @property
    def other(self) -> float:
        """Busy time no role accounts for: other processes, the kernel's interrupts, reads that raced."""
        return self.busy - sum(self.roles().values())

    @property
    def serving(self) -> float:
        """Everything but the clients: what the gateway's side (Spark, its workers, the broker, the front door)
        spent."""
        return self.spark_jvm + self.python_workers + self.broker + self.bench + self.door

    def roles(self) -> dict[str, float]:
        return {"Spark JVM": self.spark_jvm, "Python workers": self.python_workers, "broker": self.broker,
                "driver + front door": self.bench, "clients": self.clients, "door process": self.door}


def _stat_fields(pid: int | str) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()  # after the name, which may hold spaces


def _own_s(f: list[str]) -> float:
    return (int(f[11]) + int(f[12])) / _TICKS  # utime, stime


def _children_s(f: list[str]) -> float:
    return (int(f[13]) + int(f[14])) / _TICKS  # cutime, cstime: children waited for


def _process_table() -> dict[int, list[str]]:
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                table[int(entry.name)] = _stat_fields(entry.name)
            except (OSError, IndexError, ValueError):
                continue  # ended between the listing and the read
    return table


def _descendants(table: Mapping[int, list[str]], root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, f in table.items():
        children.setdefault(int(f[1]), []).append(pid)  # field 4, ppid
    found, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def _machine_busy() -> float:
    first = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in first[:8])
    return (user + nice + system + irq + softirq + steal) / _TICKS


def cpu_ledger(spark_pid: int, broker_pid: int | None, door_pid: int | None = None) -> CpuLedger | None:
    """The ledger now, or None where /proc does not show it (another OS, the JVM gone)."""
    try:
        table = _process_table()
        busy = _machine_busy()
        spark, me = table[spark_pid], table[os.getpid()]
    except (OSError, KeyError, IndexError, ValueError):
        return None
    workers = sum(_own_s(table[p]) + _children_s(table[p]) for p in _descendants(table, spark_pid))
    broker = _own_s(table[broker_pid]) if broker_pid in table else 0.0
    door = _own_s(table[door_pid]) if door_pid in table else 0.0
    return CpuLedger(_own_s(spark), workers, broker, _own_s(me), _children_s(me), door, busy)


@dataclass
class LedgerWindow:
    """What `measured` saw between entering and leaving its block (None where /proc could not tell)."""

    used: CpuLedger | None = None
    seconds: float = 0.0
    _began: CpuLedger | None = field(default=None, repr=False)


@contextmanager
def measured(spark_pid: int, broker_pid: int | None, door_pid: int | None = None) -> Iterator[LedgerWindow]:
    """The ledger's difference over the block, in `window.used` once it ends."""
    window = LedgerWindow(_began=cpu_ledger(spark_pid, broker_pid, door_pid))
    began = time.monotonic()
    try:
        yield window
    finally:
        window.seconds = time.monotonic() - began
        after = cpu_ledger(spark_pid, broker_pid, door_pid)
        if window._began is not None and after is not None:
            window.used = after.since(window._began)


@dataclass(frozen=True)
class RowCpu:
    """A bench row's ledger window and the records it moved in that window."""

    window: LedgerWindow
    records: float

    def per_record_us(self, part: Callable[[CpuLedger], float]) -> float | None:
        used = self.window.used
        return None if used is None or self.records <= 0 else part(used) / self.records * 1e6


ROLE_COLUMNS = ("Spark JVM", "Python workers", "broker", "driver + front door", "clients", "door process", "other")


def print_ledgers(rows: Mapping[str, RowCpu]) -> None:
    """One line per row: CPU µs per record by role, their sum, and the machine's cores busy over the row."""
    print(f"{'':52} " + " ".join(f"{c[:14]:>14}" for c in ROLE_COLUMNS) + f" {'sum':>7} {'busy cores':>10}")
    for name, cpu in rows.items():
        window, records, used = cpu.window, cpu.records, cpu.window.used
        if used is None or records <= 0 or window.seconds <= 0:
            print(f"{name[:52]:52} (no ledger)")
            continue
        shares = {**used.roles(), "other": used.other}
        per_record = [shares[c] / records * 1e6 for c in ROLE_COLUMNS]
        print(f"{name[:52]:52} " + " ".join(f"{v:>14.2f}" for v in per_record)
              + f" {used.busy / records * 1e6:>7.2f} {used.busy / window.seconds:>10.2f}")
