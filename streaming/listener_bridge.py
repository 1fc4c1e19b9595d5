"""How the gateway's query listeners hear from the driver's JVM: one py4j call per progress event.

PySpark's own bridge (`JStreamingQueryListener`) rebuilds each `QueryProgressEvent` from the JVM object
field by field — every source, state operator and metric a py4j round trip, each a reflective class lookup
in the JVM. At trigger 0 that is a fifth of the driver JVM's CPU (async-profiler, `make bench`'s round
trip), and its calls share the Python driver with the front door. A `BridgedListener` gets the
event rebuilt by PySpark's own `fromJson` (Spark Connect's path) from `progress().json()`: one call. One
that has no use for progress (`progress_events = False`) gets none, and crosses nothing for it.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark import SparkContext
from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import JStreamingQueryListener, QueryProgressEvent


class _JsonBridge(JStreamingQueryListener):
    def onQueryProgress(self, jevent: Any) -> None:
        if getattr(self.pylistener, "progress_events", True):
            progress = json.loads(jevent.progress().json())
            self.pylistener.onQueryProgress(QueryProgressEvent.fromJson({"progress": progress}))


class BridgedListener(StreamingQueryListener):
    """A `StreamingQueryListener` registered (`spark.streams.addListener`) through `_JsonBridge`."""

    progress_events: bool = True

    @property
    def _jlistener(self) -> Any:
        if not hasattr(self, "_jlistenerobj"):
            jvm = SparkContext._jvm
            assert jvm is not None, "a listener is added to a running session"
            self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(_JsonBridge(self))
        return self._jlistenerobj
