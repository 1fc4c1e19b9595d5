"""The query supervisor of `gateway run`: a failed query is restarted from its checkpoint.

A Spark cluster retries failed tasks (`spark.task.maxFailures`; `local[N,F]` on the embedded default),
but a query whose micro-batch still fails — the Kafka broker unreachable for longer than the producer's
delivery timeout, executors lost more often than the retries allow, a transient I/O error — ends. The
supervisor starts it again from the checkpoint, so the failed micro-batch is replayed with the same
clock and the sink skips what was already committed (docs/design.md: response topic: nothing lost, responses at least
once). Restarts back off exponentially (`restart_backoff_initial_s` doubling up to `restart_backoff_max_s`),
reset once a restarted query completes a micro-batch.

Some failures a restart cannot fix — the checkpoint and the segment storage disagree, storage that is
corrupt or not shared with the executors, a query plan the checkpoint cannot resume — and restarting
would only repeat them: the supervisor stops with a message that says what to do (`FATAL_CAUSES`).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from pyspark.sql.streaming import StreamingQuery

from sinks.metrics.gateway_metrics import GatewayMetrics
from sinks.metrics.health import Health

log = logging.getLogger("gateway.supervisor")


class FailureKind(Enum):
    RETRYABLE = "retryable"
    FATAL = "fatal"


@dataclass(frozen=True)
class FatalCause:
    markers: tuple[str, ...]  # texts that identify the failure in the query's exception (class or error-class names)
    advice: str  # what the operator does about it


FATAL_CAUSES: tuple[FatalCause, ...] = (
    FatalCause(("LogStateMismatchError",), "the checkpoint and the segment storage belong to different runs: "
               "restore the storage or the checkpoint that belongs to the other (the error names the partition)"),
    FatalCause(("StorageCorruptionError",), "committed segment data is damaged or missing: restore the partition "
               "directory from a backup (`gateway segments verify` shows what is wrong)"),
    FatalCause(("SharedStorageError",), "the segments root must be one filesystem visible to the driver and every "
               "executor: mount it on every host at the same path"),
    FatalCause(("AnalysisException",), "the query cannot be planned: check the configuration and the Spark version"),
    # Only the state errors a restart repeats; a state store lock timeout after an executor loss is transient.
    FatalCause(("_SCHEMA_NOT_COMPATIBLE", "INVALID_CONFIG_AFTER_RESTART", "STATEFUL_OPERATOR_NOT_MATCH"),
               "the checkpoint's state does not fit this query: use the checkpoint and the version that wrote it"),
    # The cluster refuses the gateway's credentials or permissions (the Java client's exceptions in the Kafka
    # source, librdkafka's error names in the sink): a restart only repeats it.
    FatalCause(("SaslAuthenticationException", "SASL authentication error", "_AUTHENTICATION"),
               "the Kafka cluster refused the gateway's credentials: check kafka.sasl.username and "
               "kafka.sasl.password (docs/security.md)"),
    FatalCause(("SSLHandshakeException", "SSL handshake failed"),
               "TLS with the Kafka cluster failed: check kafka.ssl.ca.location and the client certificate "
               "(docs/security.md)"),
    FatalCause(("TopicAuthorizationException", "GroupAuthorizationException", "ClusterAuthorizationException",
                "TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED"),
               "the gateway's principal lacks an ACL on the Kafka cluster: `gateway acls` prints the ones it "
               "needs (docs/security.md)"),
    FatalCause(("Failed to find data source: kafka",), "Spark's Kafka connector is not on the classpath: run "
               "`make jars`, or pass the jars with --jars"),
)


def classify(error: str) -> tuple[FailureKind, str]:
    """Whether a restart can help with a query that failed with `error` (its text, with the cause chain),
    and the operator advice for a fatal one."""
    for cause in FATAL_CAUSES:
        if any(marker in error for marker in cause.markers):
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


_CAUSE_MARKERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("executor_lost", ("ExecutorLost", "executor lost", "Lost executor", "Worker lost", "decommission")),
    ("kafka", ("KafkaException", "org.apache.kafka", "not delivered within", "_TRANSPORT", "_ALL_BROKERS_DOWN")),
    ("storage_io", ("IOException", "OSError", "[Errno", "No space left", "Read-only file system", "Permission denied")),
)


def restart_cause(error: str) -> str:
    """The `cause` label of gateway_query_restarts_total for a retryable failure."""
    for cause, markers in _CAUSE_MARKERS:
        if any(m in error for m in markers):
            return cause
    return "other"


_ERROR_LINE = re.compile(r"^(?:Caused by: )?(?:[\w$]+\.)*\w*(?:Error|Exception|Failure)\b(?:\[[^\]]*\])?: \S")
_WRAPPERS = ("Py4JJavaError", "StreamingQueryException", "An exception was raised by the Python Proxy",
             "PythonException: \n", "[FOREACH_BATCH_USER_FUNCTION_ERROR]")


def first_line(error: str, limit: int = 400) -> str:
    """The failure's headline for the log: a StreamingQueryException carries the JVM trace and the
    Python traceback, whose last `SomeError: message` line (or `Caused by:`) is the reason."""
    lines = [s.strip() for s in error.splitlines() if s.strip()]
    reasons = [s for s in lines if _ERROR_LINE.match(s) and not any(w in s for w in _WRAPPERS)]
    line = reasons[-1] if reasons else (lines[0] if lines else "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


class QuerySupervisor:
    """Runs the gateway query until `stop` is set, restarting it from its checkpoint when it fails for a
    reason a restart can fix (module docstring). `start` starts one query; `query` is the current one,
    for the caller's graceful stop."""

    def __init__(
        self, start: Callable[[], StreamingQuery], stop: threading.Event, health: Health, metrics: GatewayMetrics,
        backoff: Backoff, poll_s: float = 1.0,
    ) -> None:
        self.start = start
        self.stop = stop
        self.health = health
        self.metrics = metrics
        self.backoff = backoff
        self.poll_s = poll_s
        self.query: StreamingQuery | None = None
        self.restarts = 0

    def run(self) -> int:
        """0 when stopped by `stop`; 2 when the query failed in a way a restart cannot fix."""
        while not self.stop.is_set():
            try:
                self.query = self.start()
            except Exception as e:  # noqa: BLE001 - a failed start is judged like a failed query
                self.query = None
                error = f"{type(e).__name__}: {e}"
            else:
                failure = self._watch(self.query)
                if failure is None:
                    return 0
                error = failure
            kind, advice = classify(error)
            if kind is FailureKind.FATAL:
                log.error("query failed and a restart cannot fix it: %s\nWhat to do: %s", first_line(error), advice)
                self.health.set(live=False, ready=False, detail=f"failed: {first_line(error, 200)}")
                return 2
            self._wait_to_restart(error)
        return 0

    def _watch(self, query: StreamingQuery) -> str | None:
        """Wait while the query runs; None when `stop` was set, else the failure's text."""
        self.health.set(ready=False, detail="query started, no micro-batch yet")
        made_progress = False
        while not self.stop.is_set() and query.isActive:
            if not made_progress and query.lastProgress is not None:
                made_progress = True
                self.backoff.reset()
                self.health.set(ready=True, detail="query running")
            self.stop.wait(self.poll_s)
        if self.stop.is_set():
            return None
        self.health.set(ready=False, detail="query stopped")
        exception = query.exception()
        return str(exception) if exception is not None else "the query stopped without an error (stopped elsewhere)"

    def _wait_to_restart(self, error: str) -> None:
        cause = restart_cause(error)
        delay = self.backoff.next_delay()
        self.restarts += 1
        self.metrics.count_restart(cause)
        log.warning("query failed (%s): %s; restart %d from its checkpoint in %.0f s", cause, first_line(error),
                    self.restarts, delay)
        self.health.set(ready=False, detail=f"restarting in {delay:.0f} s after: {first_line(error, 200)}")
        self.stop.wait(delay)
