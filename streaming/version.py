"""The gateway's version: the installed distribution's metadata (`pyproject.toml`'s `version`, written by
pip), else `pyproject.toml` itself beside the package (a checkout or the code zip run without installing)."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "ingest-gateway"  # pyproject.toml's [project] name
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def gateway_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        pass
    try:
        with PYPROJECT.open("rb") as f:
            return str(tomllib.load(f)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"
