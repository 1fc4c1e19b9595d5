"""Demo traffic for `make run`: a small generator of produce batches (mostly good, some that the
gateway must reject) and a live summary of responses and segment files in the terminal."""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from contract.ingress import ingress_headers, ingress_key
from contract.responses import decode_response
from kafka_cluster.admin import end_offsets
from kafka_cluster.client_log import KAFKA_CLIENT_LOG
from kafka_cluster.security import KafkaCluster
from validators.codec.record_batch import build_record_batch

log = logging.getLogger("gateway.demo")

# The topics of conf/topics.json the demo traffic produces to ...
DEMO_TOPICS = ("demo.create-time", "demo.log-append-time")
# ... and the one it leaves alone, so that the kcat line `gateway run` logs (and the README's) reads back what it wrote.
HELLO_TOPIC = "demo.hello"


def demo_batch(rng: random.Random, now_ms: int) -> tuple[str, int, bytes]:
    topic = rng.choice(DEMO_TOPICS)
    partition = rng.randrange(3)
    count = rng.randint(1, 20)
    roll = rng.random()
    if roll < 0.05:
        base = now_ms - 3 * 86_400_000  # three days old: outside demo.create-time's 1-day window
    elif roll < 0.08:
        base = now_ms + 2 * 3_600_000  # two hours ahead: beyond message.timestamp.after.max.ms
    else:
        base = now_ms - rng.randint(0, 5000)
    if rng.random() < 0.02:
        partition = 9  # not a partition of the topic
    records = [(base + i, f"user-{rng.randrange(100)}".encode(), f"event {i} at {base + i}".encode(), ()) for i in range(count)]
    return topic, partition, build_record_batch(records)


class DemoTraffic(threading.Thread):
    """Produces demo batches to the ingress topic until stopped."""

    def __init__(self, cluster: KafkaCluster, ingress_topic: str, batches_per_second: float = 5.0, seed: int = 7) -> None:
        super().__init__(name="demo-traffic", daemon=True)
        self.cluster = cluster
        self.ingress_topic = ingress_topic
        self.interval = 1.0 / batches_per_second
        self.rng = random.Random(seed)
        self.stopped = threading.Event()
        self.sent = 0

    def run(self) -> None:
        p = Producer(self.cluster.client({"enable.idempotence": True, "linger.ms": 5, "logger": KAFKA_CLIENT_LOG}))
        while not self.stopped.wait(self.interval):
            topic, partition, batch = demo_batch(self.rng, int(time.time() * 1000))
            p.produce(
                self.ingress_topic, key=ingress_key(topic, partition), value=batch,
                headers=ingress_headers(topic, partition, uuid.uuid4().hex, client_id="demo"),
            )
            p.poll(0)
            self.sent += 1
        p.flush(10)

    def stop(self) -> None:
        self.stopped.set()


class LiveSummary(threading.Thread):
    """Reads the response topic and prints a one-line summary every few seconds."""

    def __init__(
        self, cluster: KafkaCluster, response_topic: str, segments_root: Path, every_s: float = 3.0,
        on_first_response: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__(name="live-summary", daemon=True)
        self.cluster = cluster
        self.response_topic = response_topic
        self.segments_root = Path(segments_root)
        self.every_s = every_s
        self.stopped = threading.Event()
        self.outcomes: Counter[str] = Counter()
        # called on this thread at the first response, so its line comes before any summary that counts it
        self.on_first_response = on_first_response
        self._consumer: Consumer | None = None  # made and positioned by `start`

    def start(self) -> None:
        """Positioned at the response topic's end before it returns, so every response sent after it counts,
        however soon (a group's `latest` is looked up only once the group has joined, and would skip those)."""
        c = Consumer(self.cluster.client({"group.id": self.cluster.group_id("demo-summary"), "logger": KAFKA_CLIENT_LOG,
                                          "enable.auto.commit": False}))
        ends = end_offsets(c, self.response_topic, 30, what="response topic")
        c.assign([TopicPartition(self.response_topic, p, high) for p, high in ends.items()])
        self._consumer = c
        super().start()

    def run(self) -> None:
        c = self._consumer
        assert c is not None, "LiveSummary.start positions the consumer"
        next_print = time.monotonic() + self.every_s
        while not self.stopped.is_set():
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                r = decode_response(m.value())
                if not self.outcomes:
                    self.on_first_response()
                self.outcomes[r["error_name"] or "OK"] += 1
            if time.monotonic() >= next_print:
                log.info(self.line())
                next_print += self.every_s
        c.close()

    def line(self) -> str:
        root = self.segments_root
        logs = list(Path(root).glob("*/*.log")) if root.exists() else []
        size = sum(f.stat().st_size for f in logs)
        outcomes = ", ".join(f"{k}={v}" for k, v in sorted(self.outcomes.items())) or "none yet"
        return f"responses: {outcomes} | segments: {len(logs)} files, {size / 1024:.1f} KiB under {root}"

    def stop(self) -> None:
        self.stopped.set()
