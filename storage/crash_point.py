"""Named crash points of the storage writers, for the crash tests (`tests/unit/test_segment_crash.py`,
`tests/integration/test_faults.py`): a writer process with `GATEWAY_SEGMENTS_CRASH_AT=<step>[:<n>]`
exits there; with `GATEWAY_CRASH_KILL_PIDFILE` set too it first kills the process group of the pid in
that file (the gateway's driver: a driver crash between a segment commit and the response publish).
The variable is read once, at import (a writer process has it from its start); unset, a crash point
costs one comparison.
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "GATEWAY_SEGMENTS_CRASH_AT"  # test hook: "<step>" or "<step>:<n>" -> os._exit(86) there
KILL_PIDFILE_ENV = "GATEWAY_CRASH_KILL_PIDFILE"  # test hook: SIGKILL this pid's process group first


_crash_counts: dict[str, int] = {}
_SPEC = os.environ.get(CRASH_ENV)


def crash_point(step: str) -> None:
    """Kill the process at a named step when `GATEWAY_SEGMENTS_CRASH_AT` asks for it (crash tests run a
    writer subprocess with it set)."""
    spec = _SPEC
    if not spec:
        return
    name, _, count = spec.partition(":")
    if name != step:
        return
    _crash_counts[step] = _crash_counts.get(step, 0) + 1
    if _crash_counts[step] >= int(count or 1):
        pidfile = os.environ.get(KILL_PIDFILE_ENV)
        if pidfile:
            try:
                with open(pidfile) as f:
                    os.killpg(int(f.read().strip()), signal.SIGKILL)
            except (OSError, ValueError):
                pass  # the driver is gone already: crash this process all the same
        os._exit(86)
