"""Named crash points of the storage writers, for the crash tests (`tests/unit/test_segment_crash.py`):
a writer subprocess with `GATEWAY_SEGMENTS_CRASH_AT=<step>[:<n>]` exits there; unset, one dict lookup.
"""

from __future__ import annotations

import os

CRASH_ENV = "GATEWAY_SEGMENTS_CRASH_AT"  # test hook: "<step>" or "<step>:<n>" -> os._exit(86) there


_crash_counts: dict[str, int] = {}


def crash_point(step: str) -> None:
    """Kill the process at a named step when `GATEWAY_SEGMENTS_CRASH_AT` asks for it (crash tests run a
    writer subprocess with it set; unset in production it costs one dict lookup)."""
    spec = os.environ.get(CRASH_ENV)
    if not spec:
        return
    name, _, count = spec.partition(":")
    if name != step:
        return
    _crash_counts[step] = _crash_counts.get(step, 0) + 1
    if _crash_counts[step] >= int(count or 1):
        os._exit(86)
