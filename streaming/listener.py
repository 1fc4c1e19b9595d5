"""The gateway's `StreamingQueryListener`: query progress into metrics and structured log lines.

Spark reports every micro-batch as a `StreamingQueryProgress` on the driver's listener bus. This
listener turns the gateway query's reports into `sinks.metrics.GatewayMetrics` (input and processing
rates, micro-batch duration, state store rows and memory, ingress lag = the Kafka source's latest
offsets minus the end offsets of the micro-batch) and logs one JSON line per event, carrying the
micro-batch id, on the `gateway.progress` logger: starts and terminations at INFO, progress and idle
reports at DEBUG.

Register it on the session BEFORE starting the query (`spark.streams.addListener`), so it sees the
query's start event. Listeners are session-wide: events of other queries are ignored by name/id.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
)

from sinks.metrics.gateway_metrics import GatewayMetrics
from streaming.listener_bridge import BridgedListener

log = logging.getLogger("gateway.progress")


def log_event(event: str, level: int = logging.INFO, **fields: Any) -> None:
    if log.isEnabledFor(level):
        log.log(level, "%s", json.dumps({"event": event, **fields}, sort_keys=True, default=str))


class GatewayListener(BridgedListener):
    """Feeds `metrics` from the progress of the query named `query_name` (all queries when None)."""

    def __init__(self, metrics: GatewayMetrics, query_name: str | None = None, ingress_topic: str | None = None) -> None:
        self.metrics = metrics
        self.query_name = query_name
        self.ingress_topic = ingress_topic
        self._ids: set[str] = set()  # ids of our query (terminated/idle events carry no name)
        self.last_progress: dict[str, Any] | None = None

    def _ours(self, name: str | None, query_id: Any) -> bool:
        if self.query_name is None or name == self.query_name:
            self._ids.add(str(query_id))
            return True
        return False

    # Exceptions in a listener are swallowed by Spark's listener bus with a stack trace in the JVM
    # log; catching them here keeps the reason in the gateway's own log.

    def onQueryStarted(self, event: QueryStartedEvent) -> None:
        if not self._ours(event.name, event.id):
            return
        self.metrics.set_query_active(True)
        log_event("query_started", query=event.name, id=str(event.id), run_id=str(event.runId))

    def onQueryProgress(self, event: QueryProgressEvent) -> None:
        try:
            progress = json.loads(event.progress.json)
            if not self._ours(progress.get("name"), progress.get("id")):
                return
            self.last_progress = progress
            self.metrics.set_query_active(True)
            figures = self.metrics.record_progress(progress, self.ingress_topic)
            # the INFO summary of the micro-batches is the observer's (sinks.metrics.observer); Spark's figures
            # are on the exporter and here at DEBUG
            log_event("progress", logging.DEBUG, query=progress.get("name"), run_id=progress.get("runId"),
                      phases_ms=progress.get("durationMs"), **figures)
        except Exception:  # noqa: BLE001 — a metrics problem must not be lost on the listener bus
            log.exception("could not record query progress")

    def onQueryIdle(self, event: QueryIdleEvent) -> None:
        if str(event.id) in self._ids:
            log_event("idle", logging.DEBUG, id=str(event.id), run_id=str(event.runId), timestamp=event.timestamp)

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:
        if str(event.id) not in self._ids:
            return
        self.metrics.set_query_active(False)
        last = (self.last_progress or {}).get("batchId")
        log_event("query_terminated", id=str(event.id), run_id=str(event.runId), batch_id=last,
                  exception=event.exception)
