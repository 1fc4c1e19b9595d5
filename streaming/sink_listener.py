"""The listener that hands a query's progress to its sink (`sinks.micro_batch.GatewaySink`).

It is registered before the query starts, so it hears every report, and learns the query's id when
`start()` returns. Reports that arrive before that are held, then passed on if they are the query's: a
report of another query (one of the same name that ran earlier in the session, say) never reaches the
sink. The listener removes itself when its query terminates, then tells the sink.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
)

from sinks.micro_batch import GatewaySink
from streaming.listener_bridge import BridgedListener

log = logging.getLogger("gateway.sink")


class SinkListener(BridgedListener):
    def __init__(self, spark: SparkSession, sink: GatewaySink) -> None:
        self.spark = spark
        self.sink = sink
        self._lock = threading.Lock()
        self._query_id: str | None = None
        self._held: list[tuple[str, dict[str, Any] | None]] = []  # (query id, report or None: terminated)

    @classmethod
    def register(cls, spark: SparkSession, sink: GatewaySink) -> SinkListener:
        listener = cls(spark, sink)
        spark.streams.addListener(listener)
        return listener

    def bind(self, query_id: str) -> None:
        """The query started with this id: pass on what was held of it."""
        with self._lock:
            self._query_id = query_id
            held, self._held = self._held, []
            for held_id, progress in held:
                if held_id != query_id:
                    continue
                if progress is None:
                    self._terminated()
                else:
                    self._deliver(progress)

    def onQueryStarted(self, event: QueryStartedEvent) -> None:
        pass

    def onQueryIdle(self, event: QueryIdleEvent) -> None:
        pass

    def onQueryProgress(self, event: QueryProgressEvent) -> None:
        progress = json.loads(event.progress.json)
        with self._lock:
            if self._query_id is None:
                self._held.append((str(progress.get("id")), progress))
            elif progress.get("id") == self._query_id:
                self._deliver(progress)

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:
        with self._lock:
            if self._query_id is None:
                self._held.append((str(event.id), None))
            elif str(event.id) == self._query_id:
                self._terminated()

    def _deliver(self, progress: dict[str, Any]) -> None:
        try:
            self.sink.on_progress(progress)
        except Exception:  # noqa: BLE001 — the listener bus would swallow it with a trace in the JVM's log only
            log.exception("micro-batch %s: the sink's observers failed", progress.get("batchId"))

    def _terminated(self) -> None:
        # not from the listener bus's own thread: removing a listener while the bus dispatches to it
        threading.Thread(target=self._leave, name="sink-listener-removal", daemon=True).start()

    def _leave(self) -> None:
        self.remove()
        self.sink.on_terminated()

    def remove(self) -> None:
        """Unregister: the query terminated, or did not start."""
        try:
            self.spark.streams.removeListener(self)
        except Exception:  # noqa: BLE001 — the session may be stopping; the listener is inert anyway
            log.debug("could not remove the sink's listener", exc_info=True)
