"""Logging for the driver and the Spark Python workers: one format, and warnings that cannot flood.

Python workers start with logging unconfigured, where a warning falls through to `logging.lastResort`:
a bare line without time or level. `configure_logging` gives every process the same format
(idempotent, so a worker can call it per task). `ThrottledWarning` keeps a per-key warning that may fire
for every batch (a misconfigured producer) to one line at the first occurrence, then at most one summary
line per interval with the counts of what it held back.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
# The level of the gateway's log (default INFO: a summary of the micro-batches every log_summary_interval_ms,
# state changes and problems); DEBUG adds each micro-batch's metrics line, Spark's progress report and the
# sink's summary of it, and librdkafka's lines known to be harmless (kafka_cluster/client_log.py).
LOG_LEVEL_ENV = "GATEWAY_LOG_LEVEL"


def configure_logging(level: int | None = None) -> None:
    """The gateway's log format on stderr, unless this process has configured logging already; the level
    from `level`, else $GATEWAY_LOG_LEVEL (a name such as DEBUG), else INFO."""
    root = logging.getLogger()
    if level is None:
        name = os.environ.get(LOG_LEVEL_ENV, "INFO").upper()
        level = logging.getLevelNamesMapping().get(name, logging.INFO)
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        root.addHandler(handler)
        root.setLevel(level)
        logging.getLogger("py4j").setLevel(logging.WARNING)
        logging.getLogger("py4j.clientserver").addFilter(_not_a_stop)


def _not_a_stop(record: logging.LogRecord) -> bool:
    """py4j logs every exception a foreachBatch function raises, with its traceback, at ERROR; the micro-batch a
    Ctrl-C stops is not an error (Spark ends the query cleanly and replays the micro-batch at the next start).
    Imported here, on the driver (the only process with py4j's log): the stage's Python workers configure this
    logging too, and the sink's module would bring the whole storage and Kafka client stack into their start."""
    from sinks.micro_batch import SinkInterrupted

    return not (record.exc_info and isinstance(record.exc_info[1], SinkInterrupted))


@dataclass
class _Window:
    started: float
    held_back: int = 0  # occurrences not logged since `started`
    records: int = 0  # records of those occurrences


class ThrottledWarning:
    """WARN once per key, then at most one summary per `interval_s` (logged by the first occurrence after
    the interval; the counts of a burst that ends are in the metrics, not lost from them)."""

    def __init__(
        self, logger: logging.Logger, what: str, interval_s: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.logger = logger
        self.what = what  # e.g. "with a timestamp more than 1 h ahead": completes "N record(s) ..."
        self.interval_s = interval_s
        self.clock = clock
        self._windows: dict[str, _Window] = {}

    def warn(self, key: str, records: int, message: str) -> bool:
        """Note one occurrence (`records` records) for `key`; returns whether a line was logged."""
        now = self.clock()
        window = self._windows.get(key)
        if window is None:
            self._windows[key] = _Window(started=now)
            self.logger.warning("%s (further occurrences for %s: one summary per %.0f s)", message, key, self.interval_s)
            return True
        window.held_back += 1
        window.records += records
        if now - window.started < self.interval_s:
            return False
        self.logger.warning(
            "%s: %d more batch(es), %d record(s) %s in the last %.0f s; latest: %s",
            key, window.held_back, window.records, self.what, now - window.started, message,
        )
        self._windows[key] = _Window(started=now)
        return True
