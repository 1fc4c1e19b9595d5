"""Replaying dead letters: the plan (target, fresh headers, refusals) and the sender.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contract.ingress import ingress_headers, ingress_key
from contract.topics import DEFAULT_INGRESS_TOPIC
from kafka_cluster.client_log import COMMAND_CLIENT_LOG
from kafka_cluster.security import KafkaCluster
from sinks.dlq.format import DeadLetter, replay_request_id


@dataclass(frozen=True)
class ReplayPlan:
    dead_letter: DeadLetter
    ingress_topic: str
    target_topic: str | None
    target_partition: int | None
    request_id: str | None
    refused: str | None  # why this dead letter is not replayed; None: it is (or would be)

    @property
    def key(self) -> bytes:
        return ingress_key(self.target_topic or "", self.target_partition)

    def headers(self, dlq_topic: str) -> list[tuple[str, bytes]]:
        dl = self.dead_letter
        return ingress_headers(
            self.target_topic or "", self.target_partition, self.request_id or "", client_id=dl.client_id,
            replay_of=f"{dlq_topic}:{dl.message.partition}:{dl.message.offset}", principal=dl.principal,
        )


def plan_replay(
    dl: DeadLetter, dlq_topic: str, ingress_topic: str | None = None,
    to_topic: str | None = None, to_partition: int | None = None, default_ingress_topic: str = DEFAULT_INGRESS_TOPIC,
) -> ReplayPlan:
    """The replay of `dl` to `ingress_topic`, else the ingress topic it came from, else `default_ingress_topic`."""
    ingress = ingress_topic or dl.ingress_topic or default_ingress_topic
    topic = to_topic if to_topic is not None else dl.topic
    partition = to_partition if to_partition is not None else dl.partition
    refused = None
    if dl.foreign:
        refused = "not a dead letter of the gateway (no gw.errors.* headers)"
    elif dl.is_replay:
        refused = f"already a replay (of {dl.replay_of}): replaying it again could loop"
    elif dl.message.value is None:
        refused = "null value: nothing to replay"
    elif topic is None:
        refused = "no target topic (gw.topic was missing): give --to-topic"
    elif partition is None:
        refused = f"no target partition (gw.partition was {dl.partition_text!r}): give --to-partition"
    return ReplayPlan(dl, ingress, topic, partition, None if dl.foreign else replay_request_id(dlq_topic, dl), refused)


@dataclass(frozen=True)
class ReplayOutcome:
    plan: ReplayPlan
    sent: bool
    ingress_partition: int | None = None
    ingress_offset: int | None = None
    error: str | None = None


class ReplaySender:
    """One idempotent producer for a whole replay; `send` waits for every delivery report of its plans."""

    def __init__(self, cluster: KafkaCluster, dlq_topic: str, timeout_s: float) -> None:
        from confluent_kafka import Producer

        self.dlq_topic = dlq_topic
        self.timeout_s = timeout_s
        self.producer = Producer(cluster.client({
            "enable.idempotence": True,
            "acks": "all",
            "message.max.bytes": 64 * 1024 * 1024,
            "client.id": "gw-dlq-replay",
            "logger": COMMAND_CLIENT_LOG,
        }))

    def send(self, plans: Sequence[ReplayPlan]) -> list[ReplayOutcome]:
        reports: dict[int, tuple[int | None, int | None, str | None]] = {}

        def on_delivery(index: int) -> Any:
            def report(err: Any, msg: Any) -> None:
                reports[index] = (None, None, str(err)) if err is not None else (msg.partition(), msg.offset(), None)
            return report

        for i, plan in enumerate(plans):
            if plan.refused is not None:
                continue
            while True:
                try:
                    self.producer.produce(
                        plan.ingress_topic, key=plan.key, value=plan.dead_letter.message.value,
                        headers=plan.headers(self.dlq_topic), on_delivery=on_delivery(i),
                    )
                    break
                except BufferError:
                    self.producer.poll(0.1)  # local queue full: serve delivery reports, then retry
        self.producer.flush(self.timeout_s)
        out = []
        for i, plan in enumerate(plans):
            if plan.refused is not None:
                out.append(ReplayOutcome(plan, False))
                continue
            p, o, err = reports.get(i, (None, None, f"no delivery report within {self.timeout_s:.0f} s"))
            out.append(ReplayOutcome(plan, err is None, p, o, err))
        return out
