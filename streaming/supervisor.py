"""The query supervisor of `gateway run`: a failed query is restarted from its checkpoint.

A Spark cluster retries failed tasks (`spark.task.maxFailures`; `local[N,F]` on the embedded default),
but a query whose micro-batch still fails — the Kafka broker unreachable for longer than the producer's
delivery timeout, executors lost more often than the retries allow, a transient I/O error — ends. The
supervisor starts it again from the checkpoint, so the failed micro-batch is replayed with the same
clock and the sink skips what was already committed (DESIGN §4.3: nothing lost, responses at least
once). Restarts back off exponentially (`restart_backoff_initial_s` doubling up to `restart_backoff_max_s`),
reset once a restarted query completes a micro-batch.

Some failures a restart cannot fix — the checkpoint and the segment storage disagree, storage that is
corrupt or not shared with the executors, a query plan the checkpoint cannot resume — and restarting
would only repeat them: the supervisor stops with a message that says what to do (`FATAL_CAUSES`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum

log = logging.getLogger("gateway.supervisor")


class FailureKind(Enum):
    RETRYABLE = "retryable"
    FATAL = "fatal"


@dataclass(frozen=True)
class FatalCause:
    marker: str  # text that identifies the failure in the query's exception (Python or JVM class name)
    advice: str  # what the operator does about it


FATAL_CAUSES: tuple[FatalCause, ...] = (
    FatalCause("LogStateMismatchError", "the checkpoint and the segment storage belong to different runs: "
               "restore the storage or the checkpoint that belongs to the other (the error names the partition)"),
    FatalCause("StorageCorruptionError", "committed segment data is damaged or missing: restore the partition "
               "directory from a backup (`gateway segments verify` shows what is wrong)"),
    FatalCause("SharedStorageError", "the segments root must be one filesystem visible to the driver and every "
               "executor: mount it on every host at the same path"),
    FatalCause("AnalysisException", "the query cannot be planned: check the configuration and the Spark version"),
    FatalCause("STATE_STORE_", "the checkpoint's state does not fit this query: use the checkpoint and the version "
               "that wrote it"),
    FatalCause("Failed to find data source: kafka", "Spark's Kafka connector is not on the classpath: run "
               "`make jars`, or pass the jars with --jars"),
)


def classify(error: str) -> tuple[FailureKind, str]:
    """Whether a restart can help with a query that failed with `error` (its text, with the cause chain),
    and the operator advice for a fatal one."""
    for cause in FATAL_CAUSES:
        if cause.marker in error:
            return FailureKind.FATAL, cause.advice
    return FailureKind.RETRYABLE, ""


@dataclass
class Backoff:
    """Capped exponential backoff between restarts; `reset` after a restart made progress."""

    initial_s: float = 1.0
    max_s: float = 60.0
    _next_s: float = 0.0

    def __post_init__(self) -> None:
        self._next_s = self.initial_s

    def next_delay(self) -> float:
        delay = self._next_s
        self._next_s = min(self._next_s * 2, self.max_s)
        return delay

    def reset(self) -> None:
        self._next_s = self.initial_s


def first_line(error: str, limit: int = 400) -> str:
    """The failure's headline for the log (a StreamingQueryException carries the whole JVM trace)."""
    line = next((s.strip() for s in error.splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"
