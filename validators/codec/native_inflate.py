"""zlib-ng's inflate (`zlib_ng.zlib_ng`, the `zlib-ng` package) for gzip records, loaded where installed.

zlib-ng is zlib's fork with vectorised inflate: the same checks (its inflate keeps zlib's table builder,
so it refuses exactly the streams zlib refuses, which Java's `Inflater` — zlib — refuses too) through the
same interface (`decompressobj`, `eof`, `unused_data`, `unconsumed_tail`, a `max_length` bound), many
times faster on long matches. ISA-L was measured and not used: it accepts Huffman code sets zlib refuses
("invalid literal/lengths set"). The gzip reader in `compression.py` uses this first and zlib, the
reference, for every stream it refuses, so an error's text is always zlib's. Without the package zlib
alone is used (one warning).
"""

from __future__ import annotations

from validators.native_modules import load_extension

NATIVE_INFLATE = load_extension("zlib_ng.zlib_ng", "zlib inflates gzip records (slower)")
