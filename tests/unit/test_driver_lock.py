"""The driver lock (streaming/driver_lock.py) between real processes: one holder at a time, a waiter takes
it as soon as the holder is killed, and nothing in the holder's own process drops it by reading who holds it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from streaming.driver_lock import DriverLock

HOLD = """
import sys, threading
from pathlib import Path
from streaming.driver_lock import DriverLock
lock = DriverLock(Path(sys.argv[1]))
print("held" if lock.try_acquire() else "refused", flush=True)
if lock.held:
    lock.record("127.0.0.1:9093")
    lock.holder()  # reading who holds it must not drop the lock
    print("recorded", flush=True)
    threading.Event().wait()
"""


def _holder(checkpoint: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(checkpoint)], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    assert proc.stdout.readline().strip() == "recorded"
    return proc


def test_one_holder_at_a_time_and_a_waiter_takes_over_a_killed_one(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoints" / "gateway"
    active = _holder(checkpoint)
    try:
        standby = DriverLock(checkpoint)
        assert not standby.try_acquire()
        holder = standby.holder()
        assert holder is not None and holder.pid == active.pid and holder.front_door == "127.0.0.1:9093"
        assert not standby.held

        third = subprocess.run([sys.executable, "-c", HOLD, str(checkpoint)], capture_output=True, text=True,
                               cwd=Path(__file__).resolve().parents[2], timeout=60)
        assert third.stdout.strip() == "refused"

        os.kill(active.pid, signal.SIGKILL)  # as a crashed driver: the kernel releases its lock
        active.wait(30)
        assert standby.wait(threading.Event())
        assert standby.held
        standby.record("")
        third = subprocess.run([sys.executable, "-c", HOLD, str(checkpoint)], capture_output=True, text=True,
                               cwd=Path(__file__).resolve().parents[2], timeout=60)
        assert third.stdout.strip() == "refused"  # the new holder keeps it
        standby.release()
        assert not standby.held
    finally:
        if active.poll() is None:
            active.kill()


def test_a_waiter_stops_when_told(tmp_path: Path) -> None:
    checkpoint = tmp_path / "gateway"
    first, second = DriverLock(checkpoint), DriverLock(checkpoint)
    assert first.try_acquire()
    assert not second.try_acquire()  # open-file-description locks: even inside one process
    stop = threading.Event()
    stop.set()
    assert not second.wait(stop)
    assert second.holder() is None  # nobody recorded themselves
    first.release()
    assert second.try_acquire()  # released by the first (two locks of one process exclude each other too)
    second.release()
