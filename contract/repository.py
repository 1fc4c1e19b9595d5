"""Where the repository's own files are: the root that `conf/`, `.jvm/` (what `make jars` fetches and builds)
and `build/` are relative to, and that a relative path in the config resolves against (docs/configuration.md)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
