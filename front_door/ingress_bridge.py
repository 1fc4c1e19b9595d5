"""The front door's link to the gateway: one ingress message per produced partition batch (docs/design.md: ingress topic)
and the gateway's answer to it from the response topic, matched by request id.

Request ids are `fd-<instance>-<n>`: the instance is random per start, so ids never repeat across
front doors or restarts, and a response is matched only by the front door that sent its batch.
The response topic is read from its end offsets as they are at start, so every answer to this
instance's batches is seen. Responses are at-least-once (a replayed micro-batch republishes): the first
completes the waiter, later copies find none.

confluent-kafka runs two threads here (ingress delivery reports, the response reader); results reach
the asyncio loop through `call_soon_threadsafe`.

Sizes (`contract.limits`): the ingress producer's message.max.bytes is the gateway's ingress message
limit, so any batch the front door reads can be handed on and the stage decides about its size
(MESSAGE_TOO_LARGE and a dead letter over its topic's max.message.bytes). At start the bridge reads
what the cluster itself lets through (the ingress topic's max.message.bytes, the brokers'
socket.request.max.bytes): on a cluster that carries less, a larger batch gets MESSAGE_TOO_LARGE at the
door (it could never get through: not retriable) with a log line saying which setting to raise. The batch
bytes are handed to librdkafka as kio parsed them (bytes: `produce` takes no memoryview); librdkafka
copies them into its queue until the ingress broker has them.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaError, KafkaException
from kio.schema.errors import ErrorCode

from contract.ingress import ingress_headers, ingress_key
from contract.limits import PRODUCE_REQUEST_OVERHEAD_BYTES, batch_bytes_through
from contract.responses import decode_response
from front_door.metrics import ProducePhases
from kafka_cluster.admin import HopLimits, describe_hop_limits, end_offsets
from kafka_cluster.client_log import KAFKA_CLIENT_LOG
from kafka_cluster.security import KafkaCluster

log = logging.getLogger("gateway.front_door")

RESPONSES_AT_ONCE = 1000  # the most the response reader hands the door's loop in one call


def failed(request_id: str, topic: str, partition: int, message: str,
           code: ErrorCode = ErrorCode.kafka_storage_error) -> dict[str, Any]:
    """The answer when the ingress topic did not take a batch: nothing was decided. KAFKA_STORAGE_ERROR
    (the default) is retriable; MESSAGE_TOO_LARGE, for a batch the ingress hop can never carry, is not
    (RecordTooLargeException at a Java client)."""
    return {"request_id": request_id, "topic": topic, "partition": partition, "error_code": code,
            "error_name": code.name.upper(), "error_message": message, "base_offset": -1,
            "log_append_time_ms": -1, "log_start_offset": -1, "record_errors": []}


class Answers:
    """The gateway's answers to one request's partition batches, by request id, awaited together: one future for
    the request however many batches it hands on (a future per batch gathered by `asyncio.wait` took a third of a
    one-partition produce's CPU on the door's loop; docs/performance.md, "Scale"). Answered on the door's loop."""

    __slots__ = ("_done", "_expected", "responses")

    def __init__(self) -> None:
        self._done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._expected = 0
        self.responses: dict[str, dict[str, Any]] = {}

    def expect(self) -> None:
        """One more batch handed on for this request."""
        self._expected += 1

    def answer(self, request_id: str, response: dict[str, Any]) -> None:
        self.responses[request_id] = response
        if len(self.responses) >= self._expected and not self._done.done():
            self._done.set_result(None)

    async def wait(self, timeout_s: float) -> None:
        """Until every batch handed on is answered, or `timeout_s` has passed (the missing ones are not in
        `responses`: `IngressBridge.forget` them)."""
        if len(self.responses) >= self._expected:
            return
        timer = self._done.get_loop().call_later(timeout_s, _expire, self._done)
        try:
            await self._done
        finally:
            timer.cancel()


@dataclass(slots=True)
class _Pending:
    """A batch waiting for its response, with the wall-clock times of its hops (ProducePhases)."""

    answers: Answers
    handed: float
    acked: float | None = None


class IngressBridge:
    def __init__(
        self, cluster: KafkaCluster, ingress_topic: str, response_topic: str, *, publish_timeout_ms: int,
        max_message_bytes: int, on_response: Callable[[], None] = lambda: None,
        on_phases: Callable[[ProducePhases], None] = lambda _phases: None,
    ) -> None:
        self.cluster = cluster
        self.ingress_topic = ingress_topic
        self.response_topic = response_topic
        self.instance = uuid.uuid4().hex[:12]
        self._prefix = f"fd-{self.instance}-"
        self._key_prefix = self._prefix.encode()
        self._ids = itertools.count()
        self._publish_timeout_ms = publish_timeout_ms
        self._max_message_bytes = max_message_bytes
        # the largest batch the ingress hop carries: what this producer may send until start() has read
        # what the cluster takes
        self.max_batch_bytes = batch_bytes_through(max_message_bytes, None, None)
        self._on_response = on_response
        self._on_phases = on_phases
        self._waiters: dict[str, _Pending] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._producer: Any = None
        self._consumer: Any = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        from confluent_kafka import Consumer, Producer

        self._loop = loop
        self._producer = Producer(self.cluster.client({
            "enable.idempotence": True,  # the ingress hop never duplicates or reorders a partition's batches
            "acks": "all",
            "linger.ms": 1,
            "message.max.bytes": self._max_message_bytes,
            "message.timeout.ms": self._publish_timeout_ms,
            "client.id": f"front-door-{self.instance}",
            "logger": KAFKA_CLIENT_LOG,
        }))
        self._consumer = Consumer(self.cluster.client({
            "group.id": self.cluster.group_id(f"front-door-{self.instance}", unique=False),
            "enable.auto.commit": False,
            "allow.auto.create.topics": False,
            "fetch.wait.max.ms": 10,
            "logger": KAFKA_CLIENT_LOG,
        }))
        self._consumer.assign(self._response_ends())
        self.max_batch_bytes = self._batch_bytes_through_cluster()
        for name, target in (("ingress", self._deliveries), ("responses", self._responses)):
            t = threading.Thread(target=target, name=f"front-door-{name}", daemon=True)
            t.start()
            self._threads.append(t)

    def _response_ends(self) -> list[Any]:
        from confluent_kafka import TopicPartition

        ends = end_offsets(self._consumer, self.response_topic, 30, what="response topic")
        return [TopicPartition(self.response_topic, p, high) for p, high in ends.items()]

    def _batch_bytes_through_cluster(self) -> int:
        wanted = batch_bytes_through(self._max_message_bytes, None, None)
        try:
            hop = describe_hop_limits(self.cluster, self.ingress_topic)
        except Exception as e:  # a cluster that does not answer DescribeConfigs: assume what was asked for
            log.warning("cannot read the ingress topic's size limits (%s); assuming batches up to %d bytes pass",
                        e, wanted)
            hop = HopLimits(None, None)
        carried = batch_bytes_through(self._max_message_bytes, hop.topic_max_message_bytes, hop.broker_request_bytes)
        if carried < wanted:
            log.warning(
                "the ingress hop carries batches up to %d bytes only, not the %d the front door accepts (ingress "
                "topic %s: max.message.bytes=%s, needs %d; brokers: socket.request.max.bytes=%s, needs %d): larger "
                "batches get MESSAGE_TOO_LARGE at the door and no dead letter. Raise those (docs/clients.md: sizes and "
                "limits) or lower front_door_max_request_bytes.",
                carried, wanted, self.ingress_topic, hop.topic_max_message_bytes, self._max_message_bytes,
                hop.broker_request_bytes, self._max_message_bytes + PRODUCE_REQUEST_OVERHEAD_BYTES)
        return carried

    def too_large(self, topic: str, partition: int, size: int) -> dict[str, Any] | None:
        """MESSAGE_TOO_LARGE for a batch the ingress hop cannot carry (logged with the reason), else None."""
        if size <= self.max_batch_bytes:
            return None
        message = (f"The record batch size in the append to {topic}-{partition} is {size} bytes which exceeds the "
                   f"{self.max_batch_bytes} bytes the gateway's ingress topic {self.ingress_topic} carries.")
        log.warning("%s Refused at the front door: raise the ingress topic's max.message.bytes (and the brokers' "
                    "socket.request.max.bytes) to carry it, see the start-up warning.", message)
        return failed("", topic, partition, message, ErrorCode.message_too_large)

    def next_request_id(self) -> str:
        return f"{self._prefix}{next(self._ids)}"

    def send(
        self, topic: str, partition: int, records: bytes, answers: Answers | None, *, client_id: str | None, acks: int,
        principal: str, transactional_id: str | None = None, origin: str | None = None,
        transaction_version: int | None = None,
    ) -> str:
        """Hand one partition batch to the ingress topic: its request id; the gateway's response goes to `answers`
        (None for acks=0: nobody waits). Call on the loop's thread. `transactional_id`: authorized for the batch;
        `origin`, `transaction_version`: the transaction coordinator's marker (`contract.ingress`)."""
        request_id = self.next_request_id()
        if answers is not None:
            answers.expect()
            with self._lock:
                self._waiters[request_id] = _Pending(answers, time.time())

        def delivered(err: Any, _msg: Any) -> None:
            if err is None:
                with self._lock:
                    if (pending := self._waiters.get(request_id)) is not None:
                        pending.acked = time.time()
            else:
                log.warning("ingress did not take %s (%s-%d): %s", request_id, topic, partition, err)
                self._complete(request_id, self._not_taken(request_id, topic, partition, err))

        try:
            self._producer.produce(
                self.ingress_topic, key=ingress_key(topic, partition), value=records, on_delivery=delivered,
                headers=ingress_headers(topic, partition, request_id, client_id=client_id, acks=acks,
                                        principal=principal, transactional_id=transactional_id, origin=origin,
                                        transaction_version=transaction_version),
            )
        except KafkaException as e:  # refused by librdkafka itself: too large for its message.max.bytes
            log.warning("ingress did not take %s (%s-%d): %s", request_id, topic, partition, e)
            self._complete(request_id, self._not_taken(request_id, topic, partition, e.args[0]))
        except (BufferError, ValueError) as e:  # queue full / a value librdkafka does not take
            self._complete(request_id, failed(request_id, topic, partition, f"ingress topic: {e}"))
        return request_id

    def _not_taken(self, request_id: str, topic: str, partition: int, err: KafkaError) -> dict[str, Any]:
        """A size the ingress hop refused (librdkafka's message.max.bytes, the topic's max.message.bytes,
        changed since start) can never get through: MESSAGE_TOO_LARGE. Anything else may pass later."""
        if err.code() == KafkaError.MSG_SIZE_TOO_LARGE:
            return failed(request_id, topic, partition, f"ingress topic {self.ingress_topic}: {err.str()}",
                          ErrorCode.message_too_large)
        return failed(request_id, topic, partition, f"ingress topic: {err}")

    def forget(self, request_id: str) -> None:
        """Drop a waiter that timed out: its late response finds nobody."""
        with self._lock:
            self._waiters.pop(request_id, None)

    def _complete(self, request_id: str, response: dict[str, Any]) -> None:
        """Answer the request (from any thread)."""
        if (to := self._take(request_id)) is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(to.answer, request_id, response)

    def _take(self, request_id: str, published_ms: int | None = None) -> Answers | None:
        """The answers `request_id` goes to, its waiter forgotten; None when nobody waits (another door's request,
        or one timed out). `published_ms` (the response message's timestamp) times its hops."""
        received = time.time()
        with self._lock:
            pending = self._waiters.pop(request_id, None)
        if pending is None:
            return None
        # the hops are recorded before the answer is released: a client that has its answer finds them counted
        if published_ms is not None and pending.acked is not None:
            published = published_ms / 1000
            self._on_phases(ProducePhases(ingress_append=pending.acked - pending.handed,
                                          gateway=published - pending.acked, response_delivery=received - published))
        return pending.answers

    def _deliveries(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.1)

    def _responses(self) -> None:
        """The response topic read: what is there when a message comes, up to `RESPONSES_AT_ONCE`, answered
        with one call into the door's loop (a micro-batch publishes its responses together; a call per
        response woke the loop, and passed the interpreter's lock between the threads, as many times)."""
        while not self._stop.is_set():
            first = self._consumer.poll(0.1)
            if first is None:
                continue
            answers = []
            read = False
            for msg in (first, *self._consumer.consume(RESPONSES_AT_ONCE - 1, 0)):
                if msg.error() is not None:
                    log.warning("response topic: %s", msg.error())
                    continue
                read = True
                key = msg.key()
                if key is None or not key.startswith(self._key_prefix):  # another front door's or producer's
                    continue
                try:
                    response = decode_response(msg.value())
                except (ValueError, EOFError, TypeError) as e:
                    log.warning("undecodable response %r at %s-%d@%d: %s", key, msg.topic(), msg.partition(),
                                msg.offset(), e)
                    continue
                kind, published_ms = msg.timestamp()
                request_id = key.decode()
                to = self._take(request_id, published_ms if kind != TIMESTAMP_NOT_AVAILABLE else None)
                if to is not None:
                    answers.append((to, request_id, response))
            if read and self._loop is not None:
                self._loop.call_soon_threadsafe(_answer, self._on_response, answers)

    def unreachable(self, timeout_s: float) -> str | None:
        """Why the gateway's Kafka cluster cannot be reached now (its metadata for the ingress topic not
        answered within `timeout_s`), or None when it answers. From any thread."""
        producer = self._producer
        if producer is None:
            return "the front door is not connected to the gateway's Kafka cluster"
        try:
            meta = producer.list_topics(self.ingress_topic, timeout=timeout_s)
        except KafkaException as e:
            return f"the gateway's Kafka cluster ({self.cluster}) does not answer: {e.args[0].str()}"
        topic = meta.topics.get(self.ingress_topic)
        if topic is None or topic.error is not None:
            return f"ingress topic {self.ingress_topic}: {topic.error if topic is not None else 'missing'}"
        return None

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)
        if self._producer is not None:
            self._producer.flush(10)
            self._producer = None  # librdkafka's producer has no close: dropping it ends its threads
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def _expire(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def _answer(on_response: Callable[[], None], answers: list[tuple[Answers, str, dict[str, Any]]]) -> None:
    """On the door's loop: responses were read (Fetch's long polls look again), and these requests answered."""
    on_response()
    for to, request_id, response in answers:
        to.answer(request_id, response)
