"""The C record walk (`_record_walk.c`, built by `pip install -e .`), loaded when present; on a Spark
executor it is extracted from the shipped zip. Without it the pure-Python walk (`record_walks`) is used.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import os
import shutil
import sys
import tempfile
import zipfile
import zipimport
from types import ModuleType

log = logging.getLogger(__name__)


def _load_native() -> ModuleType | None:
    """`validators.codec._record_walk` (the C record walk), or None: the pure-Python reference walk is then
    used, with one warning. Spark cluster mode ships the package as a zip (streaming/session.py) and
    zipimport cannot load an extension module: a matching shared object in that zip is copied to a
    private temporary directory, loaded, and the copy removed (the loaded mapping stays valid)."""
    try:
        from validators.codec import _record_walk

        return _record_walk
    except ImportError as e:
        reason = str(e)
    package_loader = getattr(sys.modules.get("validators"), "__loader__", None)
    if isinstance(package_loader, zipimport.zipimporter):
        try:
            module = _load_native_from_zip(package_loader.archive)
            if module is not None:
                return module
            reason = f"no validators/codec/_record_walk{importlib.machinery.EXTENSION_SUFFIXES[0]} in {package_loader.archive}"
        except (OSError, ImportError, zipfile.BadZipFile) as e:
            reason = str(e)
    log.warning("validators.codec._record_walk is not available (%s): the pure-Python record walk is used (slower); "
                "build it with `pip install -e .`", reason)
    return None


def _load_native_from_zip(archive: str) -> ModuleType | None:
    names = [f"validators/codec/_record_walk{suffix}" for suffix in importlib.machinery.EXTENSION_SUFFIXES]
    with zipfile.ZipFile(archive) as zf:
        present = set(zf.namelist())
        name = next((n for n in names if n in present), None)
        if name is None:
            return None
        blob = zf.read(name)
    directory = tempfile.mkdtemp(prefix="gateway-native-")
    try:
        path = os.path.join(directory, name.rsplit("/", 1)[1])
        with open(path, "wb") as f:
            f.write(blob)
        spec = importlib.util.spec_from_file_location("validators.codec._record_walk", path)
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    sys.modules[spec.name] = module
    return module


NATIVE_WALK = _load_native()
