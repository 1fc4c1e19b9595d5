"""`DataFrame.mapInArrow` with its function bound into Spark once, for a job that runs every micro-batch.

PySpark's `mapInArrow` wraps its function anew at every call: a new Python UDF in the JVM, and each column
looked up and passed one by one — about 90 py4j round trips for the decision row's 33 columns. Each round trip
takes the driver's GIL back when the JVM answers, and beside the front door's event loop in the same process
(`gateway run`) each waits for it: a median of 0.28 s a micro-batch (p90 0.61 s) under a spread load, 0.05 s
with the door in a process of its own (docs/performance.md, "Scale"). Bound once (the UDF over the columns by name, as a Java `Column`), a call is one
round trip; Spark resolves the names against each micro-batch's plan as it would `df[name]`.

Whatever differs between calls (the micro-batch's id) goes in the rows, not in the function
(`sinks.micro_batch`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import pandas_udf
from pyspark.sql.types import StructType
from pyspark.util import PythonEvalType

ArrowFunction = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


class ArrowMap:
    """`df.mapInArrow(function, schema)` over `columns` (in that order; each task's Arrow batches carry these
    columns by these names), the UDF made at the first call and kept for every later one."""

    def __init__(self, function: ArrowFunction, schema: StructType, columns: Sequence[str]) -> None:
        self.function, self.schema, self.columns = function, schema, tuple(columns)
        self._udf_column: Any = None  # a py4j reference to the Java Column (one JVM per driver process)

    def __call__(self, df: DataFrame) -> DataFrame:
        if self._udf_column is None:
            udf = pandas_udf(self.function, returnType=self.schema,  # type: ignore[call-overload]
                             functionType=PythonEvalType.SQL_MAP_ARROW_ITER_UDF)
            self._udf_column = udf(*(F.col(name) for name in self.columns))._jc
        # PySpark's own `mapInArrow` ends the same way: the Dataset's mapInArrow(udf, isBarrier, profile)
        return DataFrame(df._jdf.mapInArrow(self._udf_column, False, None), df.sparkSession)
