"""What every Python worker of the query does first (the stage's and the sink's): `prepare_worker`.

On its own, away from `streaming.stage`: a function is pickled into Spark's tasks by reference to its module, so
each worker imports the module it comes from. Here that is logging, the allocator's settings and the collector's
(`python_heap`) only; the sink's workers do not import pandas, and the stage's do not import the storage and Kafka
client stack.
"""

from __future__ import annotations

from streaming.logs import configure_logging
from streaming.python_heap import keep_between_tasks, settle_heap
from streaming.worker_memory import keep_worker_memory


def prepare_worker() -> None:
    """The gateway's logging (a worker starts with it unconfigured), its allocator settings, and its collector
    settled on what the worker holds at its first call (its imports; `streaming.python_heap`)."""
    configure_logging()
    keep_worker_memory()
    settle_heap()


def prepare_sink_worker() -> None:
    """`prepare_worker`, then what the sink's worker keeps between tasks (its open partition logs) frozen for the
    collection PySpark runs after each task (`python_heap.keep_between_tasks`)."""
    prepare_worker()
    keep_between_tasks()
