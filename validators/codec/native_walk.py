"""The C record walk (`_record_walk.c`, built by `pip install -e .`), loaded when present (also from the
zip Spark ships to executors: `validators.native_modules`). Without it the pure-Python walk
(`record_walks`) is used.
"""

from __future__ import annotations

from validators.native_modules import load_extension

NATIVE_WALK = load_extension("validators.codec._record_walk", "the pure-Python record walk is used (slower)")
