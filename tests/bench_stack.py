"""`make bench`, end to end on the real stack: the gateway beside its anchors, in one run.

Anchors (same raw batches, same topic configs, same broker, same machine, same run):
- Apache Kafka, sequential: one connection, one ProduceRequest at a time (Kafka's latency);
- Apache Kafka, pipelined: several connections with several requests in flight each, acks=-1
  (what a real producer does; Kafka's throughput);
- Spark's floor (`tests.spark_floor`): the gateway's plan shape with a pass-through stage and a
  counting sink, at the same trigger and load (the fixed cost of Spark itself).

Kafka's clients (`tests.bench_clients`): the Java client (Kafka's ProducerPerformance) and librdkafka, at
their defaults and at the documented settings, and one request at a time, through the front door of a
running gateway query beside the same producers against Apache Kafka; send->delivery report latency,
and the ratios to Kafka and to the gateway's own backlog throughput. Alone:
`python -m tests.bench --quick --only clients`.

The backlog on a secured broker (`bench_secured_backlog`, in the backlog section): the gateway drains the
same backlog from the stack's plaintext broker and from a SASL_SSL one (`tests.secured_kafka`: SCRAM-SHA-512,
TLS, StandardAuthorizer; the gateway's principal holding exactly the listed ACLs), in alternating order, with
the ratio SASL_SSL / plaintext of records/s and of drain time. Alone:
`python -m tests.bench --only secured-backlog` (`--quick --per-trigger 100` for a smoke run).

Reported, never asserted: records/s, MB/s, produce->response p50/p95/p99, micro-batch duration
p50/p95, the ratios to the targets, and the scaling of micro-batch duration with ingress
batches per micro-batch and with target partitions touched (fixed and marginal cost).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from contract.responses import decode_response
from embedded.local_kafka import LocalKafka
from kafka_cluster.admin import create_topics
from streaming.config import GatewayConfig
from streaming.python_heap import settle_heap
from streaming.query import start_gateway, stop_gracefully, topic_specs
from streaming.session import build_spark_session, stop_session
from tests.cpu_ledger import LedgerWindow, RowCpu, measured, print_ledgers
from tests.kafka_wire import ProduceConnection
from tests.spark_floor import start_floor
from validators.codec.compression import CompressionType
from validators.codec.record_batch import build_record_batch

if TYPE_CHECKING:  # imported where a secured drain runs: the other sections need no certificates
    from tests.secured_kafka import SecuredKafka

KAFKA_VERSION = "Apache Kafka 4.2.1"
BENCH_TOPIC = "bench"
BENCH_PARTITIONS = 1000  # the registry topic; a workload touches the first `partitions` of them
# Batches a drain of `bench_partitions_touched` queues: 1 000 a micro-batch, the first not steady (7 steady ones)
PARTITIONS_TOUCHED_BATCHES = 8000
# The Kafka clients' rows (`tests.bench_clients`): a 4-partition LogAppendTime topic whose partitions the
# clients' own partitioners pick, in the gateway's registry and, as the anchor, on the bench's broker.
CLIENT_TOPIC = "bench-clients"
CLIENT_ANCHOR_TOPIC = "kafka-clients-anchor"
CLIENT_PARTITIONS = 4
# The same topic with room for large batches (the documented large-batch settings): max.message.bytes
# 16 MiB + 12, Kafka's default shape (a batch of 16 MiB plus the log overhead), on both sides.
CLIENT_LARGE_TOPIC = "bench-clients-large"
CLIENT_LARGE_ANCHOR_TOPIC = "kafka-clients-large-anchor"
CLIENT_LARGE_MESSAGE_BYTES = 16 * 1024 * 1024 + 12


@dataclass(frozen=True)
class Workload:
    name: str
    value_size: int = 100
    codec: CompressionType = CompressionType.NONE
    records: int = 100

    def batches(self, count: int, partitions: int, now_ms: int) -> list[tuple[str, int, bytes]]:
        value = b"v" * self.value_size
        out = []
        for i in range(count):
            records = [(now_ms - 1000 + r, b"key-%d" % r, value) for r in range(self.records)]
            out.append((BENCH_TOPIC, i % partitions, build_record_batch(records, compression=self.codec)))
        return out


@dataclass
class Row:
    name: str
    records_per_s: float | None = None
    mb_per_s: float | None = None
    latency_ms: Sequence[float] = ()
    micro_batch_s: Sequence[float] = ()
    note: str = ""
    # quantile -> ms (1.0: the maximum), for rows whose client reports percentiles, not each latency
    latency_pcts: Mapping[float, float] | None = None
    cpu: RowCpu | None = None  # where the machine's CPU went over the row (`tests.cpu_ledger`)

    def latency_at(self, q: float) -> float | None:
        if self.latency_ms:
            return quantile(self.latency_ms, q)
        return None if self.latency_pcts is None else self.latency_pcts.get(q)


@dataclass
class Drain:
    """A query that drained a prepared ingress topic in several micro-batches (available-now)."""

    durations_s: list[float]
    rows: list[int]
    phases: list[dict[str, float]] = field(default_factory=list)
    cpu: LedgerWindow | None = None  # over the query, from its start to its end

    @property
    def steady(self) -> tuple[list[float], list[int]]:
        """Micro-batches after the first (query start, worker start, JIT are not steady state)."""
        return (self.durations_s[1:], self.rows[1:]) if len(self.durations_s) > 1 else (self.durations_s, self.rows)


def quantile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


# The bench starts a query on fresh topics for every drain, and Spark's Kafka source pools each query's
# consumers and its last fetched records (keyed by the query's own consumer group) for 5 minutes after the
# query ends: 13 MB of live heap per 40 000-batch drain, half each (measured with these timeouts at 5 s: flat).
# A backlog section of ~80 queries ran the 2 GB driver out of heap (2026-11-27). A gateway runs one query,
# which reuses its pool entries every micro-batch.
BENCH_SPARK_CONF = {
    "spark.kafka.consumer.cache.timeout": "10s",
    "spark.kafka.consumer.cache.evictorThreadRunInterval": "5s",
    "spark.kafka.consumer.fetchedData.cache.timeout": "10s",
    "spark.kafka.consumer.fetchedData.cache.evictorThreadRunInterval": "5s",
}


# A drain that has not ended by then is stopped and its row fails: once (2026-11-27) a floor task and its Python
# worker stalled, each waiting for the other across their socket, and the bench waited with them.
DRAIN_TIMEOUT_S = 600


class Stack:
    """One broker and one Spark session for the whole run; fresh topics and checkpoints per query."""

    def __init__(self, work: Path, master: str = "local[2]") -> None:
        self.work = work
        self.master = master
        self.broker = LocalKafka(work / "kafka")
        self.spark: SparkSession | None = None
        self.topics_file = work / "topics.json"
        log_append_time = {"message.timestamp.type": "LogAppendTime"}
        large_batches = {**log_append_time, "max.message.bytes": str(CLIENT_LARGE_MESSAGE_BYTES)}
        self.topics_file.write_text(json.dumps({"topics": {
            BENCH_TOPIC: {"partitions": BENCH_PARTITIONS, "configs": log_append_time},
            CLIENT_TOPIC: {"partitions": CLIENT_PARTITIONS, "configs": log_append_time},
            CLIENT_LARGE_TOPIC: {"partitions": CLIENT_PARTITIONS, "configs": large_batches}}}))
        self.run = 0

    def __enter__(self) -> Stack:
        self.broker.start()
        log_append_time = {"message.timestamp.type": "LogAppendTime"}
        large_batches = {**log_append_time, "max.message.bytes": str(CLIENT_LARGE_MESSAGE_BYTES)}
        create_topics(self.broker.cluster, [("kafka-anchor", BENCH_PARTITIONS, log_append_time),
                                                      (CLIENT_ANCHOR_TOPIC, CLIENT_PARTITIONS, log_append_time),
                                                      (CLIENT_LARGE_ANCHOR_TOPIC, CLIENT_PARTITIONS, large_batches)])
        self.spark = build_spark_session(self.config("start", spark_conf=BENCH_SPARK_CONF), app_name="gateway-bench")
        settle_heap()  # the bench's driver process, as `gateway run` settles its own once started
        return self

    def __exit__(self, *exc: object) -> None:
        if self.spark is not None:
            stop_session(self.spark)
        self.broker.stop()

    def config(self, name: str, **overrides: Any) -> GatewayConfig:
        """A fresh gateway config: its own ingress/response/DLQ topics, checkpoint and segments."""
        self.run += 1
        tag = f"{name}-{self.run}-{uuid.uuid4().hex[:4]}"
        base = GatewayConfig(
            bootstrap_servers=self.broker.bootstrap_servers,
            ingress_topic=f"in-{tag}", ingress_partitions=4, response_topic=f"resp-{tag}", dlq_topic=f"dlq-{tag}",
            topics_file=str(self.topics_file), segments_root=str(self.work / "segments" / tag),
            checkpoint_root=str(self.work / "checkpoints"), query_name=f"bench_{tag}".replace("-", "_"),
            spark_master=self.master, ui_enabled=False, max_offsets_per_trigger=100_000,
        )
        return base.with_overrides(**overrides)

    # ---- Kafka anchors

    def kafka_sequential(self, payloads: list[tuple[str, int, bytes]]) -> Row:
        latencies = []
        start = time.perf_counter()
        with ProduceConnection(self.broker.bootstrap_servers) as conn:
            for _, partition, batch in payloads:
                t0 = time.perf_counter()
                result = conn.produce("kafka-anchor", partition, batch)
                latencies.append((time.perf_counter() - t0) * 1000)
                if result.error_code != 0:
                    raise RuntimeError(f"Kafka rejected a bench batch: {result}")
        return _throughput_row(f"{KAFKA_VERSION}, sequential", payloads, time.perf_counter() - start, latencies)

    def kafka_pipelined(self, payloads: list[tuple[str, int, bytes]], connections: int = 4, in_flight: int = 5) -> Row:
        """`connections` threads, each with its own connection and up to `in_flight` requests
        outstanding (librdkafka's and the Java producer's default is 5), acks=-1."""
        shares = [payloads[i::connections] for i in range(connections)]
        latencies: list[float] = []
        errors: list[str] = []

        def run(share: list[tuple[str, int, bytes]]) -> None:
            sent: list[tuple[int, float]] = []
            with ProduceConnection(self.broker.bootstrap_servers) as conn:
                for i, (_, partition, batch) in enumerate(share):
                    sent.append((conn.send("kafka-anchor", partition, batch), time.perf_counter()))
                    if len(sent) >= in_flight or i == len(share) - 1:
                        while sent and (len(sent) >= in_flight or i == len(share) - 1):
                            cid, t0 = sent.pop(0)
                            result = conn.receive(cid)
                            latencies.append((time.perf_counter() - t0) * 1000)
                            if result.error_code != 0:
                                errors.append(str(result))

        threads = [threading.Thread(target=run, args=(s,)) for s in shares]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise RuntimeError(f"Kafka rejected a bench batch: {errors[0]}")
        return _throughput_row(f"{KAFKA_VERSION}, pipelined ({connections} conn x {in_flight} in flight)",
                               payloads, time.perf_counter() - start, latencies)

    # ---- queries

    def _start(self, kind: str, config: GatewayConfig, available_now: bool) -> StreamingQuery:
        assert self.spark is not None
        if kind == "gateway":
            return start_gateway(self.spark, config, available_now=available_now)[0]
        return start_floor(self.spark, config, available_now=available_now)

    def drain(self, kind: str, payloads: list[tuple[str, int, bytes]], per_trigger: int,
              secured: SecuredKafka | None = None, **overrides: Any) -> Drain:
        """Queue `payloads` on a fresh ingress topic, then drain it `per_trigger` batches per micro-batch;
        `secured`: on that broker's SASL_SSL listener (`on_secured`) instead of the stack's plaintext one."""
        config = self.config(kind, max_offsets_per_trigger=per_trigger, **overrides)
        broker = self.broker
        if secured is not None:
            config, broker = on_secured(secured, config, self.work / "secured-gateway"), secured.broker
        create_topics(config.cluster, topic_specs(config))
        produce_ingress(config, payloads)
        with self.cpu_measured(broker) as cpu:
            query = self._start(kind, config, available_now=True)
            if not query.awaitTermination(DRAIN_TIMEOUT_S):
                query.stop()
                raise RuntimeError(f"{kind} query did not drain {len(payloads)} batches in {DRAIN_TIMEOUT_S} s")
        if query.exception() is not None:
            raise RuntimeError(f"{kind} query failed: {query.exception()}")
        progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
        return Drain(
            durations_s=[p["durationMs"]["triggerExecution"] / 1000 for p in progress],
            rows=[p["numInputRows"] for p in progress],
            phases=[{k: v / 1000 for k, v in p["durationMs"].items()} for p in progress],
            cpu=cpu,
        )

    def spark_pid(self) -> int:
        assert self.spark is not None
        return int(self.spark._jvm.java.lang.ProcessHandle.current().pid())

    def cpu_measured(self, broker: LocalKafka | None = None,
                     door_pid: int | None = None) -> AbstractContextManager[LedgerWindow]:
        """The machine's CPU by role over the block (`tests.cpu_ledger`); `broker`: the one the row's query
        reads (default the stack's), so its TLS and SASL work counts as the broker's, not as 'other';
        `door_pid`: the row's `gateway door` process, counted as its own role."""
        return measured(self.spark_pid(), (broker or self.broker).pid, door_pid)

    def latency(self, kind: str, payloads: list[tuple[str, int, bytes]], count: int, per_second: float,
                trigger: str) -> tuple[list[float], list[float]]:
        """Produce `count` batches at `per_second` to a running query; produce->response latencies (ms)
        and the micro-batch durations (s). The gateway's response is its real response, read by a
        consumer; the floor's is the end of the micro-batch that held the batch (it has no responses)."""
        config = self.config(f"{kind}-lat", trigger_interval=trigger)
        create_topics(config.cluster, topic_specs(config))
        query = self._start(kind, config, available_now=False)
        consumer = None
        if kind == "gateway":
            consumer = Consumer({"bootstrap.servers": config.bootstrap_servers, "group.id": uuid.uuid4().hex})
            consumer.assign([TopicPartition(config.response_topic, p, 0) for p in range(config.ingress_partitions)])
        producer = Producer({"bootstrap.servers": config.bootstrap_servers, "linger.ms": 0})
        produced: dict[str, float] = {}
        positions: dict[tuple[int, int], str] = {}

        def delivered(rid: str) -> Callable[[object, Any], None]:
            def report(err: object, msg: Any) -> None:
                if err is None:
                    positions[(msg.partition(), msg.offset())] = rid
            return report

        received: dict[str, float] = {}
        next_send = time.monotonic()
        for i in range(count):
            topic, partition, batch = payloads[i % len(payloads)]
            rid = uuid.uuid4().hex
            produced[rid] = time.time()
            producer.produce(config.ingress_topic, key=f"{topic}/{partition}".encode(), value=batch,
                             headers=[("gw.topic", topic.encode()), ("gw.partition", str(partition).encode()),
                                      ("gw.request.id", rid.encode())], on_delivery=delivered(rid))
            producer.poll(0)
            next_send += 1.0 / per_second
            while time.monotonic() < next_send:  # the offered load (pacing), reading responses meanwhile
                _read_responses(consumer, received, max(0.0, next_send - time.monotonic()))
        producer.flush(30)
        deadline = time.monotonic() + 120
        if consumer is not None:
            while len(received) < len(produced) and time.monotonic() < deadline:
                _read_responses(consumer, received, 0.5)
            consumer.close()
        else:
            while time.monotonic() < deadline and not _floor_done(query, positions):
                time.sleep(0.2)  # polling the query's progress; there is no completion callback
        stop_gracefully(query)
        progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
        durations = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
        if consumer is None:
            received = _floor_completions(progress, positions)
        latencies = [(received[r] - produced[r]) * 1000 for r in produced if r in received]
        return latencies, durations


def _read_responses(consumer: Consumer | None, received: dict[str, float], timeout: float) -> None:
    if consumer is None:
        time.sleep(timeout)
        return
    m = consumer.poll(timeout)
    if m is not None and m.error() is None:
        received.setdefault(decode_response(m.value())["request_id"], time.time())


def _end_offsets(progress: dict) -> dict[int, int]:
    ends = json.loads(progress["sources"][0]["endOffset"]) if isinstance(progress["sources"][0]["endOffset"], str) \
        else progress["sources"][0]["endOffset"]
    return {int(p): int(o) for partitions in ends.values() for p, o in partitions.items()}


def _floor_done(query: StreamingQuery, positions: dict[tuple[int, int], str]) -> bool:
    last = query.lastProgress
    if not last or not positions:
        return False
    ends = _end_offsets(last)
    return all(ends.get(p, 0) > o for p, o in positions)


def _floor_completions(progress: list[dict], positions: dict[tuple[int, int], str]) -> dict[str, float]:
    """Request id -> end of the floor's micro-batch that held it (first batch whose end offset passes it):
    the trigger's start plus its duration, epoch seconds."""
    out: dict[str, float] = {}
    for p in sorted(progress, key=lambda p: p["batchId"]):
        ends = _end_offsets(p)
        finished = datetime.fromisoformat(p["timestamp"]).timestamp() + p["durationMs"]["triggerExecution"] / 1000
        for (partition, offset), rid in positions.items():
            if rid not in out and ends.get(partition, 0) > offset:
                out[rid] = finished
    return out


def on_secured(kafka: SecuredKafka, config: GatewayConfig, work: Path) -> GatewayConfig:
    """`config` (its topics, storage, checkpoint and every other setting kept) on `kafka`'s SASL_SSL listener,
    with the `kafka` block and ACLs of the secured integration tests (tests/integration/secured_gateway.py):
    SCRAM-SHA-512 as `gateway`, the password in a file, exactly the ACLs the docs list for these topics."""
    from tests.integration.secured_gateway import grant_listed, secured_config

    block = secured_config(kafka, work).kafka
    secured = config.with_overrides(bootstrap_servers=kafka.bootstrap_servers, kafka=block)
    grant_listed(kafka, secured)  # before the topics exist: the gateway's principal creates them (CREATE)
    return secured


def produce_ingress(config: GatewayConfig, payloads: list[tuple[str, int, bytes]]) -> None:
    # the gateway's own cluster settings: on a secured broker the backlog is produced as its principal (WRITE on
    # the ingress topic is listed for the front door), through the same SASL_SSL listener the query reads
    p = Producer(config.cluster.client({"linger.ms": 20, "enable.idempotence": True,
                                        "message.max.bytes": config.ingress_limits().ingress_message_bytes}))
    for i, (topic, partition, batch) in enumerate(payloads):
        while True:
            try:
                p.produce(config.ingress_topic, key=f"{topic}/{partition}".encode(), value=batch,
                          headers=[("gw.topic", topic.encode()), ("gw.partition", str(partition).encode()),
                                   ("gw.request.id", f"bench-{i}".encode())])
                break
            except BufferError:
                p.poll(0.1)
    if p.flush(120) != 0:
        raise RuntimeError("could not queue the bench's ingress batches")


def _throughput_row(name: str, payloads: list[tuple[str, int, bytes]], seconds: float, latencies: list[float]) -> Row:
    records = sum(_records(b) for _, _, b in payloads)
    size = sum(len(b) for _, _, b in payloads)
    return Row(name, records / seconds, size / seconds / 1e6, latencies)


def _records(batch: bytes) -> int:
    return int.from_bytes(batch[57:61], "big")


def drain_row(name: str, drain: Drain, payloads: list[tuple[str, int, bytes]]) -> Row:
    durations, rows = drain.steady
    seconds = sum(durations)
    per_batch_records = _records(payloads[0][2])
    per_batch_bytes = len(payloads[0][2])
    cpu = RowCpu(drain.cpu, sum(drain.rows) * per_batch_records) if drain.cpu is not None else None
    return Row(name, sum(rows) * per_batch_records / seconds, sum(rows) * per_batch_bytes / seconds / 1e6,
               (), durations, note=f"{len(durations)} micro-batches of {rows[0] if rows else 0} batches", cpu=cpu)


# ---------------------------------------------------------------------------------- reporting


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def print_table(rows: Sequence[Row], tail: bool = False) -> None:
    """One line per row; `tail` adds the p99.9 and maximum latency columns."""
    tail_header = f" {'p99.9 ms':>8} {'max ms':>8}" if tail else ""
    header = (f"{'':58} {'records/s':>11} {'MB/s':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}{tail_header} "
              f"{'mb p50 s':>8} {'mb p95 s':>8}")
    print(header)
    for r in rows:
        mb = r.micro_batch_s
        tail_cols = f" {_fmt(r.latency_at(.999), '.1f'):>8} {_fmt(r.latency_at(1.0), '.1f'):>8}" if tail else ""
        print(f"{r.name[:58]:58} {_fmt(r.records_per_s, ',.0f'):>11} {_fmt(r.mb_per_s, '.2f'):>7} "
              f"{_fmt(r.latency_at(.5), '.1f'):>8} {_fmt(r.latency_at(.95), '.1f'):>8} "
              f"{_fmt(r.latency_at(.99), '.1f'):>8}{tail_cols} {_fmt(quantile(mb, .5), '.3f'):>8} "
              f"{_fmt(quantile(mb, .95), '.3f'):>8}  {r.note}")


def print_cpu(rows: Sequence[Row]) -> None:
    """Where the machine's CPU went over each row that has a ledger (`tests.cpu_ledger`)."""
    ledgers = {r.name: r.cpu for r in rows if r.cpu is not None and r.records_per_s}
    if ledgers:
        print("\nwhere the machine's CPU went, µs per record by process over each row's whole run (a client's start "
              "and a drain's first micro-batch included; 'other': busy time no process here accounts for, e.g. the "
              "producer beside a backlog), and the cores busy over the row:")
        print_ledgers(ledgers)


def ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"


def target(label: str, value: str, goal: str, met: bool | None) -> None:
    verdict = "n/a" if met is None else "met" if met else "MISSED"
    print(f"  {label:62} {value:>10}  target {goal:12} {verdict}")


def bench_end_to_end(quick: bool = False, only: str | None = None, backlog_per_trigger: int | None = None) -> None:
    """The end-to-end tables; `only="clients"`: just the Kafka clients' rows (`tests.bench_clients`), after a
    gateway warm-up, with the gateway's own backlog row for their ratio; `only="secured-backlog"`: just the
    backlog on SASL_SSL beside plaintext. `backlog_per_trigger`: the 100 x 100 B backlog's batches per
    micro-batch (4 micro-batches are queued) instead of the default."""
    with tempfile.TemporaryDirectory(prefix="gateway-bench-") as work:  # several GB of segments and broker logs
        _bench_end_to_end(Path(work), quick, only, backlog_per_trigger)


def _bench_end_to_end(work: Path, quick: bool, only: str | None, backlog_per_trigger: int | None = None) -> None:
    from tests.bench_clients import backlog_row, bench_clients

    latency_batches = 50 if quick else 200
    now = int(time.time() * 1000)
    small = Workload("100 x 100 B, none")
    # Throughput: a backlog drained in micro-batches of ~100 MB (the gateway's max_offsets_per_trigger
    # default is 20 000 batches), 3 steady micro-batches after the query's first.
    per_trigger = {small.name: 10_000, "100 x 1 KiB, none": 1_000, "100 x 100 B, zstd": 10_000}
    if quick:
        per_trigger = {k: v // 10 for k, v in per_trigger.items()}
    if backlog_per_trigger:
        per_trigger[small.name] = backlog_per_trigger
    secured_rounds = 2 if quick else 4  # even: each side goes first as often as the other
    workloads = [small, Workload("100 x 1 KiB, none", value_size=1024), Workload("100 x 100 B, zstd", codec=CompressionType.ZSTD)]
    if only == "scale":
        _bench_scale(work, quick, small, now)
        return
    if only == "spread":
        from tests.bench_spread import bench_spread

        bench_spread(work, quick)
        return
    if only == "transactions":
        from tests.bench_transactions import bench_transactions

        bench_transactions(work, quick)
        return
    if only == "backlog":
        print(f"\n== end to end, the gateway's backlog beside Spark's floor: local[2], {KAFKA_VERSION} broker on loopback ==")
        with Stack(work) as stack:
            warm_up(stack, small, now, quick)
            payloads = small.batches(4 * per_trigger[small.name], 4, now)
            pairs = backlog_pairs(stack, small.name, payloads, per_trigger[small.name], 1 if quick else 4)
            pip = stack.kafka_pipelined(payloads)
            pip.name = f"{pip.name} ({small.name})"
            print_table([pip, *(row for pair in pairs for row in pair)])
            print_cpu([row for pair in pairs for row in pair])
            bench_secured_backlog(stack, small.name, payloads, per_trigger[small.name], secured_rounds)
            scaling = bench_scaling(stack, small, now, quick)
        print("\nratios and targets (backlog):")
        print(f"  (gateway / floor by round: {', '.join(ratio(g.records_per_s, f.records_per_s) for g, f in pairs)})")
        to_floor = statistics.median(g.records_per_s / f.records_per_s for g, f in pairs)
        gateway = statistics.median(g.records_per_s for g, _ in pairs)
        target("backlog throughput gateway / Spark floor, median of the rounds", f"{to_floor:.2f}x", ">= 0.8",
               to_floor >= 0.8)
        target("backlog throughput gateway (median round) / Kafka pipelined", ratio(gateway, pip.records_per_s),
               ">= 0.5", gateway / pip.records_per_s >= 0.5)
        if scaling:
            (_, g_marginal), (_, f_marginal) = scaling
            target("marginal cost per batch gateway / Spark floor", ratio(g_marginal, f_marginal), "<= 1.2",
                   g_marginal / f_marginal <= 1.2)
        return
    if only == "shape":
        _bench_shape(work, quick, small, now, per_trigger[small.name])
        return
    if only == "secured-backlog":
        print(f"\n== end to end, the gateway's backlog on SASL_SSL beside plaintext only: local[2], {KAFKA_VERSION} "
              f"brokers on loopback ==")
        with Stack(work) as stack:
            warm_up(stack, small, now, quick)
            bench_secured_backlog(stack, small.name, small.batches(4 * per_trigger[small.name], 4, now),
                                  per_trigger[small.name], secured_rounds)
        return
    if only in ("secured-door", "doors"):
        from tests.bench_doors import bench_doors
        from tests.bench_secured_door import bench_secured_door

        what, section = {"secured-door": ("the secured front door", bench_secured_door),
                         "doors": ("front doors as processes", bench_doors)}[only]
        print(f"\n== end to end, {what} only: local[2], {KAFKA_VERSION} broker on loopback ==")
        with Stack(work) as stack:
            stack.drain("gateway", small.batches(2000, 4, now), 500)  # warm-up, not reported
            section(stack, quick)
        return
    if only == "clients":
        print(f"\n== end to end, Kafka clients only: local[2], {KAFKA_VERSION} broker on loopback ==")
        with Stack(work) as stack:
            stack.drain("gateway", small.batches(2000, 4, now), 500)  # warm-up, not reported
            backlog = backlog_row(stack, quick, now)
            bench_clients(stack, quick, backlog)
        return
    print(f"\n== end to end: LogAppendTime topic, 4 target partitions, local[2], {KAFKA_VERSION} broker on loopback; "
          f"throughput rows drain a backlog of 4 micro-batches ({', '.join(f'{k}: {v}' for k, v in per_trigger.items())} "
          f"batches per micro-batch) ==")
    with Stack(work) as stack:
        warm_up(stack, small, now, quick)
        rows: list[Row] = []
        figures: dict[str, Any] = {}
        for w in workloads:
            payloads = w.batches(4 * per_trigger[w.name], 4, now)
            seq = stack.kafka_sequential(payloads)
            pip = stack.kafka_pipelined(payloads)
            gw = drain_row(f"gateway ({w.name})", stack.drain("gateway", payloads, per_trigger[w.name]), payloads)
            fl = drain_row(f"Spark floor ({w.name})", stack.drain("floor", payloads, per_trigger[w.name]), payloads)
            seq.name, pip.name = f"{seq.name} ({w.name})", f"{pip.name} ({w.name})"
            rows += [seq, pip, gw, fl]
            figures[w.name] = (seq, pip, gw, fl)

        payloads = small.batches(latency_batches, 4, now)
        latency: dict[str, tuple[list[float], list[float]]] = {}
        for trigger in ("1 second", "0 seconds"):
            for kind in ("gateway", "floor"):
                lat, mb = latency[f"{kind} {trigger}"] = stack.latency(kind, payloads, latency_batches, 10.0, trigger)
                what = "gateway produce->response" if kind == "gateway" else "Spark floor produce->micro-batch end"
                rows.append(Row(f"{what}, 10 batches/s, trigger {trigger} ({len(lat)}/{latency_batches})",
                                latency_ms=lat, micro_batch_s=mb))
        print()
        print_table(rows)
        print_cpu(rows)

        bench_clients(stack, quick, backlog=figures[small.name][2])
        scaling = bench_scaling(stack, small, now, quick)
        from tests.bench_doors import bench_doors
        from tests.bench_secured_door import bench_secured_door

        bench_secured_door(stack, quick)
        bench_doors(stack, quick)

    seq, pip, gw, fl = figures[small.name]
    print("\nratios and targets:")
    target("throughput gateway / Kafka sequential (100 x 100 B)", ratio(gw.records_per_s, seq.records_per_s), ">= 1.5",
           gw.records_per_s / seq.records_per_s >= 1.5)
    target("throughput gateway / Kafka pipelined", ratio(gw.records_per_s, pip.records_per_s), ">= 0.5",
           gw.records_per_s / pip.records_per_s >= 0.5)
    target("throughput gateway / Spark floor", ratio(gw.records_per_s, fl.records_per_s), "-", None)
    for trigger in ("1 second", "0 seconds"):
        lat_gw, mb_gw = latency[f"gateway {trigger}"]
        lat_fl, _ = latency[f"floor {trigger}"]
        p50, p99, fl50 = quantile(lat_gw, .5), quantile(lat_gw, .99), quantile(lat_fl, .5)
        target(f"produce->response p50 (s), trigger {trigger}", _fmt(p50 / 1000 if p50 else None, ".3f"), "<= 1.0",
               p50 is not None and p50 <= 1000)
        target(f"produce->response p99 (s), trigger {trigger}", _fmt(p99 / 1000 if p99 else None, ".3f"), "<= 1.5",
               p99 is not None and p99 <= 1500)
        target(f"latency p50 gateway / Spark floor, trigger {trigger}", ratio(p50, fl50), "<= 1.3",
               p50 is not None and fl50 is not None and p50 / fl50 <= 1.3)
    mb50 = quantile(latency["gateway 1 second"][1], .5)
    target("micro-batch duration at 10 batches/s, 1 s trigger, p50 (s)", _fmt(mb50, ".3f"), "<= 1.0",
           mb50 is not None and mb50 <= 1.0)
    if scaling:
        (g_fixed, g_marginal), (f_fixed, _) = scaling
        target("fixed cost per micro-batch gateway / Spark floor", ratio(g_fixed, f_fixed), "<= 1.2", g_fixed / f_fixed <= 1.2)
        target("marginal cost per 100-record batch (us)", f"{g_marginal * 1e6:.0f}", "<= 100", g_marginal <= 100e-6)


LONE_PER_SECOND = 2.0  # one request every 500 ms: each alone in its micro-batch, none waiting for another's


def _bench_shape(work: Path, quick: bool, small: Workload, now: int, per_trigger: int) -> None:
    """The figures the sink's shape is judged by, in one run, each beside Spark's floor of the same shape (Kafka
    source, pass-through stateful stage, foreachBatch running a pass-through job): the backlog, the marginal
    cost per batch, and a lone produce's round trip (gateway: its response read back; floor: the end of the
    micro-batch whose foreachBatch took it); then Kafka's clients through the front door (reported)."""
    from tests.bench_clients import BEFORE_ROWS, SETTINGS, bench_clients

    print(f"\n== end to end, the sink's shape beside Spark's floor of the same shape: local[2], {KAFKA_VERSION} "
          f"broker on loopback ==")
    lone_count = 20 if quick else 60
    with Stack(work) as stack:
        warm_up(stack, small, now, quick)
        payloads = small.batches(4 * per_trigger, 4, now)
        pairs = backlog_pairs(stack, small.name, payloads, per_trigger, 2 if quick else 4)
        print_table([row for pair in pairs for row in pair])
        print_cpu([row for pair in pairs for row in pair])
        scaling = bench_scaling(stack, small, now, quick)
        lone: dict[str, list[float]] = {"gateway": [], "floor": []}
        lone_rows: list[Row] = []
        for i in range(2):
            for kind in pair_order(i):
                latencies, durations = stack.latency(kind, small.batches(lone_count, 4, now), lone_count,
                                                     LONE_PER_SECOND, "0 seconds")
                lone[kind] += latencies
                what = "gateway produce->response" if kind == "gateway" else "Spark floor produce->foreachBatch end"
                lone_rows.append(Row(f"{what}, lone requests, round {i + 1} ({len(latencies)}/{lone_count})",
                                     latency_ms=latencies, micro_batch_s=durations))
        print()
        print_table(lone_rows)
        bench_clients(stack, quick, None, [s for s in SETTINGS if s.name in BEFORE_ROWS])
    print("\nratios and targets (the shape):")
    print(f"  (gateway / floor by round: {', '.join(ratio(g.records_per_s, f.records_per_s) for g, f in pairs)})")
    to_floor = statistics.median(g.records_per_s / f.records_per_s for g, f in pairs)
    target("backlog throughput gateway / Spark floor, median of the rounds", f"{to_floor:.2f}x", ">= 0.8",
           to_floor >= 0.8)
    if scaling:
        (_, g_marginal), (_, f_marginal) = scaling
        target("marginal cost per batch gateway / Spark floor", ratio(g_marginal, f_marginal), "<= 1.2",
               g_marginal / f_marginal <= 1.2)
    g50, g99, f50, f99 = (quantile(lone[k], q) for k in ("gateway", "floor") for q in (.5, .99))
    print(f"  lone round trip p50 / p99: gateway {_fmt(g50, '.0f')} / {_fmt(g99, '.0f')} ms, "
          f"floor {_fmt(f50, '.0f')} / {_fmt(f99, '.0f')} ms")
    target("lone round trip p50 gateway - floor (ms)", _fmt(g50 - f50 if g50 and f50 else None, ".0f"), "<= 40",
           g50 is not None and f50 is not None and g50 - f50 <= 40)


def backlog_pairs(
    stack: Stack, name: str, payloads: list[tuple[str, int, bytes]], per_trigger: int, rounds: int
) -> list[tuple[Row, Row]]:
    """The gateway's and the floor's drains of the same backlog for `rounds` rounds, the floor first in every
    other round (`pair_order`: the machine's speed drifts by tens of percent within minutes, and a JVM still
    warming favours whichever runs second); sorted by the ratio."""
    pairs = []
    for r in range(rounds):
        label = f"{name}, round {r + 1}" if rounds > 1 else name
        rows = {kind: drain_row(f"{'gateway' if kind == 'gateway' else 'Spark floor'} ({label})",
                                stack.drain(kind, payloads, per_trigger), payloads) for kind in pair_order(r)}
        pairs.append((rows["gateway"], rows["floor"]))
    return sorted(pairs, key=lambda pair: pair[0].records_per_s / pair[1].records_per_s)


def pair_order(i: int, sides: tuple[str, str] = ("gateway", "floor")) -> tuple[str, str]:
    """The first side (the gateway) first in even rounds, the second (the floor) in odd ones (an A/B/B/A order)."""
    return sides if i % 2 == 0 else (sides[1], sides[0])


SASL_SSL = "SASL_SSL"


def secured_backlog_pairs(
    stack: Stack, name: str, payloads: list[tuple[str, int, bytes]], per_trigger: int, rounds: int
) -> list[tuple[Row, Row]]:
    """(plaintext, SASL_SSL) rows of the gateway's drains of the same backlog, from the stack's broker and from a
    secured one, for `rounds` rounds in `pair_order` (plaintext first in even rounds). The secured broker is
    started once, here, and stopped at the end; one unreported drain of the same backlog warms it first (its
    JIT and the Spark JVM's TLS and SCRAM code), as the stack's warm-up warmed the plaintext side. Both brokers
    run through every round, so neither side has the machine to itself."""
    from tests.secured_kafka import SecuredKafka

    pairs: list[tuple[Row, Row]] = []
    with SecuredKafka(stack.work / "secured-kafka") as kafka:
        stack.drain("gateway", payloads, per_trigger, secured=kafka)
        for r in range(rounds):
            rows = {side: drain_row(f"gateway on {side} ({name}, round {r + 1})",
                                    stack.drain("gateway", payloads, per_trigger,
                                                secured=kafka if side == SASL_SSL else None), payloads)
                    for side in pair_order(r, ("plaintext", SASL_SSL))}
            pairs.append((rows["plaintext"], rows[SASL_SSL]))
    return pairs


def _drain_s(row: Row) -> float:
    """The query's wall time, start to end (its first micro-batch, and with it the consumers' logins, included)."""
    assert row.cpu is not None  # `drain_row` keeps every drain's ledger window
    return row.cpu.window.seconds


def bench_secured_backlog(stack: Stack, name: str, payloads: list[tuple[str, int, bytes]], per_trigger: int,
                          rounds: int) -> None:
    """The gateway's backlog on SASL_SSL beside plaintext (`secured_backlog_pairs`): the rows, their CPU, each
    side's median, and SASL_SSL / plaintext as the median of the rounds' ratios (a round's two drains run back to
    back, so its ratio is spared most of the machine's drift between rounds) beside each round's."""
    print(f"\n== the gateway's backlog on SASL_SSL (SCRAM-SHA-512, TLS, ACLs) beside plaintext: {len(payloads)} "
          f"batches, {per_trigger} per micro-batch, {rounds} rounds, alternating which goes first ==", flush=True)
    pairs = secured_backlog_pairs(stack, name, payloads, per_trigger, rounds)
    rows = [row for pair in pairs for row in pair]
    print_table(rows)
    print_cpu(rows)
    print(f"\n{'medians of the rounds':40} {'plaintext':>11} {'SASL_SSL':>11} {'SASL_SSL / plaintext':>21}  by round")
    figures: list[tuple[str, Callable[[Row], float], str]] = [
        ("records/s, steady micro-batches", lambda r: r.records_per_s or 0.0, ",.0f"),
        ("drain time s, query start to end", _drain_s, ".2f")]
    for label, value, spec in figures:
        ratios = [value(s) / value(p) for p, s in pairs]
        print(f"{label:40} {statistics.median(value(p) for p, _ in pairs):>11{spec}} "
              f"{statistics.median(value(s) for _, s in pairs):>11{spec}} {statistics.median(ratios):>21.2f}  "
              f"{', '.join(f'{x:.2f}' for x in ratios)}")


# The end-to-end sections' warm-up: 2 000-batch drains of the gateway and the floor, alternately, for this long
# (each pass printed). The same drain of 100 target partitions ran 3.1 s per micro-batch at first and 1.9 s four
# minutes later in one JVM (2026-11-26): the JIT compilers keep speeding Spark's code up for minutes.
BACKLOG_WARM_UP_S = 120.0


def warm_up(stack: Stack, w: Workload, now: int, quick: bool) -> None:
    """Warm Spark's JVM and the Python workers before rows that compare warm queries; not reported as rows."""
    payloads = w.batches(2000, 4, now)
    began = time.monotonic()
    passes = 0
    print(f"  warming Spark's JVM with alternating 2 000-batch drains for {0 if quick else BACKLOG_WARM_UP_S:.0f} s "
          f"(micro-batch medians):", flush=True)
    while passes < 1 or (not quick and time.monotonic() - began < BACKLOG_WARM_UP_S):
        medians = {kind: statistics.median(stack.drain(kind, payloads, 500).durations_s) for kind in ("gateway", "floor")}
        print(f"    at {time.monotonic() - began:3.0f} s: gateway {medians['gateway']:.3f} s, floor {medians['floor']:.3f} s",
              flush=True)
        passes += 1


def _fit(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares line through (batches per micro-batch, median duration): (fixed s, marginal s/batch)."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def bench_scaling(stack: Stack, w: Workload, now: int, quick: bool) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """Median steady micro-batch duration by ingress batches per micro-batch (4 target partitions) and by
    target partitions touched (1 000 batches per micro-batch); gateway and Spark floor."""
    sizes = (10, 100, 1000) if quick else (10, 100, 1000, 10000)
    print(f"\n== scaling: median micro-batch duration (s), {w.name} batches, after the query's first micro-batch ==")
    print(f"{'batches/micro-batch':>20} {'gateway':>9} {'floor':>9} {'gateway-floor':>14}")
    fits: dict[str, list[tuple[int, float]]] = {"gateway": [], "floor": []}
    for i, n in enumerate(sizes):
        payloads = w.batches((4 if n >= 10000 else 6) * n, 4, now)
        medians = {}
        for kind in pair_order(i):
            durations, _ = stack.drain(kind, payloads, per_trigger=n).steady
            medians[kind] = statistics.median(durations)
            fits[kind].append((n, medians[kind]))
        print(f"{n:>20} {medians['gateway']:>9.3f} {medians['floor']:>9.3f} {medians['gateway'] - medians['floor']:>14.3f}")
    gateway_fit, floor_fit = _fit(fits["gateway"]), _fit(fits["floor"])
    print(f"fit: gateway fixed {gateway_fit[0]:.3f} s + {gateway_fit[1] * 1e6:.0f} us/batch; "
          f"floor fixed {floor_fit[0]:.3f} s + {floor_fit[1] * 1e6:.0f} us/batch")
    bench_partitions_touched(stack, w, now, (1, 10, 100))
    return gateway_fit, floor_fit


def bench_partitions_touched(stack: Stack, w: Workload, now: int,
                             counts: Sequence[int]) -> dict[int, dict[str, list[float]]]:
    """Steady micro-batch durations by target partitions touched, 1 000 batches per micro-batch (the same bytes
    however they spread); gateway and Spark's floor of the same shape. A count listed more than once runs each
    time: its durations are pooled, and each run's median printed."""
    print(f"\n{'target partitions':>20} {'gateway':>9} {'floor':>9}   (1 000 batches per micro-batch, medians)")
    out: dict[int, dict[str, list[float]]] = {}
    for i, partitions in enumerate(counts):
        payloads = w.batches(PARTITIONS_TOUCHED_BATCHES, partitions, now)
        run = {kind: stack.drain(kind, payloads, per_trigger=1000).steady[0] for kind in pair_order(i)}
        for kind, durations in run.items():
            out.setdefault(partitions, {}).setdefault(kind, []).extend(durations)
        print(f"{partitions:>20} {statistics.median(run['gateway']):>9.3f} {statistics.median(run['floor']):>9.3f}",
              flush=True)
    return out


def _bench_scale(work: Path, quick: bool, w: Workload, now: int) -> None:
    """A micro-batch of the same bytes spread over 4 and over 1 000 target partitions, beside Spark's floor."""
    print(f"\n== scale: micro-batches spread over many target partitions, local[2], {KAFKA_VERSION} broker on "
          f"loopback ==")
    with Stack(work) as stack:
        warm_up(stack, w, now, quick)
        rows = bench_partitions_touched(stack, w, now, (4, 100, 1000) if quick else (4, 100, 1000, 4, 1000, 4, 1000))
    print("\nratios and targets (scale):")
    for kind in ("gateway", "floor"):
        many, few = statistics.median(rows[1000][kind]), statistics.median(rows[4][kind])
        print(f"  {kind}: 1 000 partitions / 4 partitions, the same bytes (medians of every run's steady micro-batches, "
              f"{few:.3f} and {many:.3f} s): {many / few:.2f}" + ("  (target <= 1.5)" if kind == "gateway" else ""))

