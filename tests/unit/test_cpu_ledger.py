"""The bench's machine-wide CPU ledger (`tests.cpu_ledger`) on real processes: each role's CPU lands in its column."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.cpu_ledger import CpuLedger, LedgerWindow, RowCpu, cpu_ledger, measured, print_ledgers

BURN_S = 0.3  # CPU seconds each burner uses: the process's own clock, not the wall's
BURN = f"import time\nt = time.process_time()\nwhile time.process_time() - t < {BURN_S}: pass\n"
# A stand-in for the Spark JVM: its child (as PySpark's daemon is) burns CPU when told to, then waits.
PARENT = f"""
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", '''
import sys, time
print("ready", flush=True)
sys.stdin.readline()
{BURN}
print("burnt", flush=True)
sys.stdin.readline()
'''], stdin=sys.stdin, stdout=sys.stdout)
child.wait()
"""


def _burn() -> None:
    began = time.process_time()
    while time.process_time() - began < BURN_S:
        pass


@pytest.fixture
def parent_with_child() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_each_role_gets_its_own_processes_cpu(parent_with_child: subprocess.Popen[str]) -> None:
    assert parent_with_child.stdin is not None and parent_with_child.stdout is not None
    with measured(parent_with_child.pid, None) as window:
        parent_with_child.stdin.write("go\n")
        parent_with_child.stdin.flush()
        assert parent_with_child.stdout.readline().strip() == "burnt"
        subprocess.run([sys.executable, "-c", BURN], check=True)  # a client, waited for
        _burn()  # this process: the driver and the front door
    used = window.used
    assert used is not None
    assert used.python_workers >= BURN_S * 0.9
    assert used.clients >= BURN_S * 0.9
    assert used.bench >= BURN_S * 0.9
    assert used.spark_jvm < BURN_S / 2  # the parent itself only waited
    assert used.broker == 0.0  # no broker given
    assert used.busy >= used.python_workers + used.clients + used.bench - 0.1  # tick rounding
    assert window.seconds > 0


def test_no_ledger_for_a_process_that_is_gone() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert cpu_ledger(proc.pid, None) is None
    with measured(proc.pid, None) as window:
        pass
    assert window.used is None


def test_since_and_other() -> None:
    earlier = CpuLedger(1, 2, 3, 4, 5, 1, 20)
    later = CpuLedger(2, 4, 4, 5, 5, 2, 30)
    used = later.since(earlier)
    assert used == CpuLedger(1, 2, 1, 1, 0, 1, 10)
    assert used.other == 4
    assert used.serving == 6  # all but the clients, the door process's included
    row = RowCpu(LedgerWindow(used=used, seconds=1.0), 1_000_000)
    assert row.per_record_us(lambda u: u.serving) == 6.0
    assert RowCpu(LedgerWindow(), 10).per_record_us(lambda u: u.busy) is None


def test_print_ledgers(capsys: pytest.CaptureFixture[str]) -> None:
    used = CpuLedger(spark_jvm=1.0, python_workers=0.5, broker=0.25, bench=0.2, clients=0.0, door=0.0, busy=2.0)
    print_ledgers({"a row": RowCpu(LedgerWindow(used=used, seconds=1.0), 1_000_000),
                   "a row without a ledger": RowCpu(LedgerWindow(), 10)})
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[-9:] == ["1.00", "0.50", "0.25", "0.20", "0.00", "0.00", "0.05", "2.00", "2.00"]
    assert out[2].endswith("(no ledger)")
