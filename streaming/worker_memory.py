"""glibc malloc settings for the Python worker that runs the stage.

Every micro-batch allocates the same working set again: the ingress batches as Python bytes, the stored
copies the decision makes, the segment's pending writes — tens of megabytes of 1–100 KiB blocks, freed when
the group ends. With glibc's defaults the freed top of the heap goes back to the kernel as soon as 128 KiB
are free there, and blocks from 128 KiB up are mmapped and unmapped one by one, so the next micro-batch
faults the same memory in again, page by page: ~13 µs per 12 KiB batch (make bench's hot path), as much
as the decision itself. Kept, the memory is reused warm.

The bounds keep an idle worker's memory to what it used: blocks up to 32 MiB (glibc's own ceiling for its
dynamic mmap threshold) come from the heap, and the heap keeps up to 256 MiB free at its top. A process
without glibc (musl, macOS) keeps its allocator's defaults.
"""

from __future__ import annotations

import ctypes

# mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD_BYTES = 32 << 20
TRIM_THRESHOLD_BYTES = 256 << 20
TOP_PAD_BYTES = 16 << 20

_tuned: bool | None = None  # once per process: None until tried


def keep_worker_memory() -> bool:
    """Apply the settings above to this process once; True where glibc took them."""
    global _tuned
    if _tuned is None:
        _tuned = _mallopt_all(
            ((M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES), (M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
             (M_TOP_PAD, TOP_PAD_BYTES))
        )
    return _tuned


def _mallopt_all(settings: tuple[tuple[int, int], ...]) -> bool:
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        mallopt = None
    if mallopt is None:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # 1 on success; musl's stub answers 0
    return all([mallopt(param, value) == 1 for param, value in settings])
