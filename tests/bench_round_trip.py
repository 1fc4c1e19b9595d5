"""`make bench`: where a produce's round trip through the front door goes, hop by hop.

One request at a time (the front door's send-and-wait row), so every hop is one batch's own:
- the front door's hops per batch (`front_door.metrics.ProducePhases`: door -> ingress acknowledged ->
  response published -> read by the door), recorded as the exporter observes them;
- the micro-batches that answered them: Spark's phases from each `StreamingQueryProgress` (latestOffset,
  queryPlanning, walCommit, addBatch, commitOffsets) and, inside addBatch, the sink's Spark job (the stage and
  the tasks) with the tasks' append (+ fsync + commit) and publish;
- what is left of the `gateway` hop once its micro-batch up to the publish (every phase before and including
  addBatch) is taken out: the wait for the micro-batch to start. commitOffsets comes after the publish: the
  client does not wait for it, the next micro-batch does.
Medians, printed, never asserted.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from front_door.metrics import FrontDoorMetrics, ProducePhases
from sinks.micro_batch import MicroBatchSummary

# Spark's trigger phases, in the order a micro-batch runs them
SPARK_PHASES = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets")


class RecordingMetrics(FrontDoorMetrics):
    """The front door's metrics, also keeping every batch's hops for the bench."""

    def __init__(self) -> None:
        super().__init__()
        self.phases: list[ProducePhases] = []

    def produce_phases(self, phases: ProducePhases) -> None:
        super().produce_phases(phases)
        self.phases.append(phases)


@dataclass
class RoundTripProbe:
    door: RecordingMetrics = field(default_factory=RecordingMetrics)
    sink: dict[int, MicroBatchSummary] = field(default_factory=dict)

    def observe(self, batch_id: int, summary: MicroBatchSummary) -> None:
        self.sink[batch_id] = summary

    def reset(self) -> None:
        self.door.phases.clear()
        self.sink.clear()


def _ms(values: Sequence[float]) -> str:
    return f"{statistics.median(values) * 1000:7.0f} ms" if values else "      - ms"


def print_round_trip(probe: RoundTripProbe, progress: Sequence[dict[str, Any]], end_to_end_ms: Sequence[float]) -> None:
    """The breakdown of the requests since `probe.reset()`; `progress`: the query's progress of their
    micro-batches (with input)."""
    hops = probe.door.phases
    if not hops or not progress:
        print("  round trip by hop: nothing recorded")
        return
    spark = {p: [q["durationMs"].get(p, 0) / 1000 for q in progress] for p in SPARK_PHASES}
    trigger = [q["durationMs"]["triggerExecution"] / 1000 for q in progress]
    sinks = [probe.sink[q["batchId"]] for q in progress if q["batchId"] in probe.sink]
    gateway = [h.gateway for h in hops]
    to_publish = statistics.median(sum(q["durationMs"].get(p, 0) for p in SPARK_PHASES[:4]) / 1000 for q in progress)
    print(f"\nround trip by hop, one request at a time through the front door (medians of {len(hops)} batches, "
          f"{len(progress)} micro-batches):")
    print(f"  produce() -> delivery report (the client's round trip)  {statistics.median(end_to_end_ms):7.0f} ms")
    print(f"  door -> ingress topic acknowledged                       {_ms([h.ingress_append for h in hops])}")
    print(f"  ingress acknowledged -> response published               {_ms(gateway)}")
    print(f"    wait for the micro-batch (the rest of that hop)         "
          f"{_ms([max(0.0, g - to_publish) for g in gateway])}")
    print(f"    micro-batch (triggerExecution)                          {_ms(trigger)}")
    for phase in SPARK_PHASES:
        print(f"      {phase:52}{_ms(spark[phase])}")
        if phase == "addBatch" and sinks:
            print(f"        the micro-batch's job (stage and sink work)       {_ms([s.sink_seconds for s in sinks])}")
            print(f"        partitions' append + fsync + commit (summed)      {_ms([s.append_seconds for s in sinks])}")
            print(f"        partitions' publish of responses (summed)         {_ms([s.publish_seconds for s in sinks])}")
    print(f"  response published -> read by the front door             {_ms([h.response_delivery for h in hops])}")
