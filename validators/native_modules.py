"""The project's C extensions (built by `pip install -e .`), loaded where present; each has a pure-Python
reference that is used instead, with one warning, where its module is missing.

On a Spark executor in cluster mode the packages arrive as a zip (streaming/session.py) and zipimport
cannot load an extension module: a matching shared object in that zip is copied to a private temporary
directory, loaded, and the copy removed (the loaded mapping stays valid).
"""

from __future__ import annotations

import importlib
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


def load_extension(name: str, fallback: str) -> ModuleType | None:
    """The extension module `name` (dotted), or None after one warning naming `fallback`, what is used instead."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        reason = str(e)
    package_loader = getattr(sys.modules.get(name.split(".", 1)[0]), "__loader__", None)
    if isinstance(package_loader, zipimport.zipimporter):
        try:
            module = _load_from_zip(name, package_loader.archive)
            if module is not None:
                return module
            reason = f"no {name.replace('.', '/')}{importlib.machinery.EXTENSION_SUFFIXES[0]} in {package_loader.archive}"
        except (OSError, ImportError, zipfile.BadZipFile) as e:
            reason = str(e)
    log.warning("%s is not available (%s): %s; build it with `pip install -e .`", name, reason, fallback)
    return None


def _load_from_zip(name: str, archive: str) -> ModuleType | None:
    stem = name.replace(".", "/")
    names = [f"{stem}{suffix}" for suffix in importlib.machinery.EXTENSION_SUFFIXES]
    with zipfile.ZipFile(archive) as zf:
        present = set(zf.namelist())
        member = next((n for n in names if n in present), None)
        if member is None:
            return None
        blob = zf.read(member)
    directory = tempfile.mkdtemp(prefix="gateway-native-")
    try:
        path = os.path.join(directory, member.rsplit("/", 1)[1])
        with open(path, "wb") as f:
            f.write(blob)
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    sys.modules[name] = module
    return module
