"""The groups on the gateway's exporter, read at scrape time (docs/operations.md: metrics style, names under
`gateway_front_door_group`): groups by state, members per group, and each group's committed offset and
lag per partition — lag = the partition's log end offset in segment storage minus the committed offset,
as kafka-consumer-groups computes it (`ConsumerGroupCommand`: LAG = LOG-END-OFFSET − CURRENT-OFFSET).

The coordinator lives on the front door's event loop; a scrape runs on the exporter's thread, so it asks
the loop for a copy (`GroupCoordinator.snapshot`) and reads storage outside it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from front_door.groups.classic_group import GroupState
from front_door.groups.coordinator_api import GroupsSnapshot
from sinks.batch_metrics import PREFIX
from storage.log_reader import log_end_offset

log = logging.getLogger("gateway.front_door.groups")

P = f"{PREFIX}front_door_group"
SNAPSHOT_TIMEOUT_S = 5.0


class GroupsCollector(Collector):
    """Registered with the front door's metrics (its families exist from the start, empty); a running
    coordinator is `attach`ed to it."""

    def __init__(self) -> None:
        self._source: tuple[Callable[[], GroupsSnapshot], asyncio.AbstractEventLoop, Path] | None = None

    def attach(self, snapshot: Callable[[], GroupsSnapshot], loop: asyncio.AbstractEventLoop, segments_root: Path) -> None:
        self._source = (snapshot, loop, segments_root)

    def detach(self) -> None:
        self._source = None

    def _take(self) -> tuple[GroupsSnapshot, Path] | None:
        source = self._source
        if source is None:
            return None
        snapshot, loop, root = source

        async def take() -> GroupsSnapshot:
            return snapshot()

        try:
            return asyncio.run_coroutine_threadsafe(take(), loop).result(SNAPSHOT_TIMEOUT_S), root
        except Exception as e:  # noqa: BLE001 - a stopped front door has no groups to show
            log.debug("no groups snapshot: %s", e)
            return None

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(self._families(None))

    def collect(self) -> Iterator[GaugeMetricFamily]:
        return iter(self._families(self._take()))

    def _families(self, taken: tuple[GroupsSnapshot, Path] | None) -> list[GaugeMetricFamily]:
        states = GaugeMetricFamily(f"{P}s", "Consumer groups this front door coordinates, by state.", labels=["state"])
        members = GaugeMetricFamily(f"{P}_members", "Members of each consumer group.", labels=["group"])
        committed = GaugeMetricFamily(f"{P}_committed_offset", "Each group's committed offset per partition.",
                                      labels=["group", "topic", "partition"])
        lag = GaugeMetricFamily(f"{P}_lag", "Each group's lag per partition: the log end offset in segment storage "
                                "minus the committed offset.", labels=["group", "topic", "partition"])
        by_state = dict.fromkeys((s.value for s in GroupState if s != GroupState.DEAD), 0)
        if taken is not None:
            snap, root = taken
            ends: dict[tuple[str, int], int] = {}
            for g in snap.groups:
                by_state[g.state.value] = by_state.get(g.state.value, 0) + 1
                members.add_metric([g.group_id], g.members)
                for (topic, partition), offset in sorted(g.offsets.items()):
                    if (topic, partition) not in ends:
                        ends[topic, partition] = log_end_offset(root, topic, partition)
                    labels = [g.group_id, topic, str(partition)]
                    committed.add_metric(labels, offset)
                    lag.add_metric(labels, max(0, ends[topic, partition] - offset))
        for state, n in by_state.items():
            states.add_metric([state], n)
        return [states, members, committed, lag]
