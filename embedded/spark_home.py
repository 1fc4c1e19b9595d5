"""Where PySpark's pip package keeps its Spark distribution (`bin/`, `jars/`; no `sbin/`), found without
importing PySpark: spark-submit's scripts need it as SPARK_HOME when the interpreter that `find-spark-home` would
ask (plain `python3`) has no pyspark, and `make jars` reads Spark's own jars from it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.find_spec("pyspark")
if _spec is None or not _spec.submodule_search_locations:
    raise ImportError("pyspark is not installed in this interpreter (make venv)")
SPARK_HOME = Path(next(iter(_spec.submodule_search_locations)))
SPARK_JARS_DIR = SPARK_HOME / "jars"
