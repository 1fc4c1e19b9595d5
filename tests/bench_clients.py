"""`make bench`, Kafka's clients: real producers through the front door of a running gateway, beside the
same producers, with the same settings, against the bench's Apache Kafka broker, in one run.

Workload: one LogAppendTime topic with 4 partitions (`CLIENT_TOPIC` in the gateway's registry,
`CLIENT_ANCHOR_TOPIC` on the broker), records of 100 B values with no key (each client's own partitioner
spreads them), acks=all, one producer at a time.

- The Java client: Kafka's own benchmark, `ProducerPerformance` 4.2.1 (`tests.producer_performance`),
  with Java's defaults (idempotent, batch.size 16384, linger.ms 5) and with the documented settings.
- librdkafka (confluent-kafka): its defaults (acks=all, not idempotent, linger.ms 5), idempotent with
  linger 5 ms, and the documented settings (`tests.librdkafka_client.produce_records`).
- One request at a time: librdkafka with linger.ms 0, produce() then wait for the delivery report.
- Every client runs in a process of its own, as a user's does: the Java tool in its JVM, librdkafka in a
  child interpreter (`tests.librdkafka_client.run_in_own_process`), not in the bench's process, whose
  GIL the front door and the driver need.
- The documented large-batch settings, Java and librdkafka, on the same topic with max.message.bytes
  16 MiB + 12 (`CLIENT_LARGE_TOPIC`, `CLIENT_LARGE_ANCHOR_TOPIC`): a larger window per round trip.

- The gateway's own backlog beside each documented row's traffic (`tests.bench_beside`): the backlog row's drain
  again while Java's producer sends that row's records/s to the broker, the ceiling the 2-core machine leaves
  a front door moving that much; the documented rows' ratios to it.

The Kafka rows run first, with no gateway query running; then one gateway query (the bench config's
default trigger) with a front door serves every front-door row in turn, so the rows share its warm JVM
and Python workers; before them, Java's defaults run through it unmeasured until the JVM's compilers
settle (`_warm_up`, each pass printed), and each row's note gives the Spark JVM's cores over the row and its JIT compilers' share.
Latency is send/produce() -> callback/delivery report (the Java tool reports percentiles in whole ms).
MB/s counts record values (10^6 B), not batch bytes as the tables above do. Errors, timeouts and the
front door's warnings are printed, never asserted; a row that fails still leaves the others.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from tests.bench_beside import Traffic, backlog_beside
from tests.bench_front_door import collected_warnings, deliveries_row, gateway_with_front_door
from tests.bench_round_trip import RoundTripProbe, print_round_trip
from tests.bench_stack import (
    CLIENT_ANCHOR_TOPIC,
    CLIENT_LARGE_ANCHOR_TOPIC,
    CLIENT_LARGE_TOPIC,
    CLIENT_PARTITIONS,
    CLIENT_TOPIC,
    KAFKA_VERSION,
    Row,
    Stack,
    Workload,
    drain_row,
    print_cpu,
    print_table,
    quantile,
    ratio,
)
from tests.cpu_ledger import RowCpu
from tests.jvm_threads import JvmCpu, describe, jvm_cpu
from tests.librdkafka_client import run_in_own_process
from tests.producer_performance import PerfRun, run_producer_performance

RECORD_SIZE = 100  # bytes of value per record, no key
ACKS_ALL = (("acks", "all"),)  # the workload's; also both clients' default

# The documented producer settings for throughput through the front door (docs/clients.md gives them,
# docs/performance.md their figures). Defined once, here; the rows below use nothing else.
# - Java: a partition's batch up to 1 MiB (the topic's max.message.bytes, 1 MiB + 12, bounds it), lingering
#   50 ms to fill it; a request may carry every partition's batch (max.request.size 16 MiB, under the
#   front door's 100 MiB request limit); buffer.memory 256 MiB so 5 such requests in flight do not block send().
JAVA_DOCUMENTED_PROPS: tuple[tuple[str, str], ...] = (
    ("batch.size", "1048576"),
    ("linger.ms", "50"),
    ("max.request.size", "16777216"),
    ("buffer.memory", "268435456"),
)
# - Java over many partitions at once (docs/clients.md, "Many partitions at once"): the producer takes `batch.size`
#   from `buffer.memory` for every batch it holds until it is acknowledged, up to 5 in flight and one filling per
#   partition, so the batch is cut to buffer.memory / (6 x partitions), a power of two, at most the 1 MiB above.
JAVA_BATCHES_HELD_PER_PARTITION = 6


def java_documented_props(partitions: int) -> tuple[tuple[str, str], ...]:
    """`JAVA_DOCUMENTED_PROPS` for a producer that writes to `partitions` partitions at once."""
    props = dict(JAVA_DOCUMENTED_PROPS)
    fits = int(props["buffer.memory"]) // (JAVA_BATCHES_HELD_PER_PARTITION * max(partitions, 1))
    batch = min(int(props["batch.size"]), 1 << max(fits.bit_length() - 1, 0))
    return tuple({**props, "batch.size": str(batch)}.items())


# - librdkafka: batch.size as above; message.max.bytes bounds a ProduceRequest as Java's
#   max.request.size does, but librdkafka (2.16) puts one partition's batch in each ProduceRequest
#   (librdkafka issue #1700), and its idempotent producer keeps one ProduceRequest in flight per partition
#   whatever max.in.flight says (librdkafka pull request #4989, open), so through the front door it moves
#   one batch per partition per round trip: partitions x batch.size, bounded by the topic's max.message.bytes;
#   batch.num.messages (default 10 000) must not cut a batch of 100 B records short of batch.size;
#   queue.buffering.max.messages (default 100 000, ~10 full batches of 100 B records) holds the 5 batches
#   in flight and a full one filling on each partition; in a saturated producer a larger queue adds only
#   waiting time to latency.
#   linger.ms 1000, at least the round trip: while a partition's one request is in flight and its linger has
#   passed, librdkafka's broker threads poll without sleeping (measured: 0.44 of a core at 2 000 records/s
#   with linger 5 ms, 0.04 with 500 ms); a saturated producer's batches fill before the linger ends.
LIBRDKAFKA_DOCUMENTED_CONFIG: tuple[tuple[str, str], ...] = (
    ("enable.idempotence", "true"),
    ("linger.ms", "1000"),
    ("batch.size", "1048576"),
    ("batch.num.messages", "100000"),
    ("message.max.bytes", "16777216"),
    ("queue.buffering.max.messages", "200000"),
)
# - librdkafka without idempotence: the same batches, 5 requests in flight per connection (one partition's node
#   each), so the window is 5x the idempotent one's. An idempotent librdkafka producer's broker thread also polls
#   without sleeping while a full batch waits for its partition's one request (`rd_kafka_toppar_producer_serve`
#   sets the wake-up from the batch before the in-flight check, which counts messages against a bound of 5
#   requests): 0.6-1.1 of a core through the front door (2026-11-27). Linger as Java's; a queue that holds the
#   5 batches per partition in flight and the ones filling.
LIBRDKAFKA_DOCUMENTED_NOT_IDEMPOTENT_CONFIG: tuple[tuple[str, str], ...] = tuple({
    **dict(LIBRDKAFKA_DOCUMENTED_CONFIG), "enable.idempotence": "false", "linger.ms": "50",
    "queue.buffering.max.messages": "500000"}.items())
# The documented large-batch settings, on a topic whose max.message.bytes is 16 MiB + 12 (both sides): the
# window grows with the batch while the micro-batch's fixed cost stays.
# - Java: 4 MiB batches, 5 requests in flight to each partition's node: 80 MiB in flight, inside buffer.memory.
JAVA_LARGE_PROPS: tuple[tuple[str, str], ...] = (
    ("batch.size", str(4 * 1024 * 1024)),
    ("linger.ms", "50"),
    ("max.request.size", str(16 * 1024 * 1024)),
    ("buffer.memory", str(256 * 1024 * 1024)),
)
# - librdkafka: one 16 MiB batch in flight per partition (see above); batch.num.messages (at most 1 000 000)
#   and the queue must hold ~155 000 records of 100 B per batch.
LIBRDKAFKA_LARGE_CONFIG: tuple[tuple[str, str], ...] = (
    ("enable.idempotence", "true"),
    ("linger.ms", "1000"),
    ("batch.size", str(16 * 1024 * 1024)),
    ("batch.num.messages", "1000000"),
    ("message.max.bytes", str(32 * 1024 * 1024)),
    ("queue.buffering.max.messages", "2000000"),
)


@dataclass(frozen=True)
class ClientSetting:
    """A producer and its settings, with the records one row sends: sized so a row through the gateway
    takes roughly 20-60 s in --quick mode (more in the full run) at the rate measured on the 2-core
    machine; the Kafka row sends the same records."""

    client: str  # "java" (ProducerPerformance), "librdkafka", or "send-and-wait" (librdkafka, one at a time)
    name: str  # the row's label, after "Kafka: " or "front door: "
    props: tuple[tuple[str, str], ...]
    records_quick: int
    records_full: int
    large_topic: bool = False  # the topic with 16 MiB max.message.bytes (`CLIENT_LARGE_TOPIC`)

    def config(self) -> dict[str, str]:
        return dict(ACKS_ALL + self.props)

    def records(self, quick: bool) -> int:
        return self.records_quick if quick else self.records_full

    def topic(self) -> str:
        return CLIENT_LARGE_TOPIC if self.large_topic else CLIENT_TOPIC

    def anchor_topic(self) -> str:
        return CLIENT_LARGE_ANCHOR_TOPIC if self.large_topic else CLIENT_ANCHOR_TOPIC


# Records per row (quick, full), from a quick run through the gateway at its 1 s trigger (2026-11-23):
# Java defaults ~2.6k records/s, Java documented ~115k, librdkafka defaults ~85k, idempotent and documented ~33k;
# one at a time, ~1 request/s (a micro-batch each).
JAVA_DEFAULTS = ClientSetting("java", "Java ProducerPerformance, defaults", (), 60_000, 150_000)
SETTINGS: tuple[ClientSetting, ...] = (
    JAVA_DEFAULTS,
    ClientSetting("java", "Java ProducerPerformance, documented settings", JAVA_DOCUMENTED_PROPS, 3_000_000, 8_000_000),
    ClientSetting("librdkafka", "librdkafka, defaults", (), 2_000_000, 5_000_000),
    ClientSetting("librdkafka", "librdkafka, idempotent, linger 5 ms",
                  (("enable.idempotence", "true"), ("linger.ms", "5")), 1_000_000, 2_000_000),
    ClientSetting("librdkafka", "librdkafka, documented settings", LIBRDKAFKA_DOCUMENTED_CONFIG, 1_000_000, 2_000_000),
    ClientSetting("librdkafka", "librdkafka, documented settings, not idempotent", LIBRDKAFKA_DOCUMENTED_NOT_IDEMPOTENT_CONFIG,
                  2_000_000, 5_000_000),
    ClientSetting("java", "Java, documented large-batch settings", JAVA_LARGE_PROPS, 6_000_000, 12_000_000, True),
    ClientSetting("librdkafka", "librdkafka, documented large-batch settings", LIBRDKAFKA_LARGE_CONFIG,
                  4_000_000, 6_000_000, True),
    # counts are requests
    ClientSetting("send-and-wait", "librdkafka, one at a time, linger 0 ms", (("linger.ms", "0"),), 30, 200),
)


# "Before": a baseline measured in the same run, the front door with Spark's and the gateway's plainer
# settings — one node leading every partition, a 1 s trigger, two tasks per micro-batch, checkpoint files
# through Spark's FileContext manager with their `.crc` twins — for the rows whose targets name it.
BEFORE_CONFIG: dict[str, Any] = {"trigger_interval": "1 second", "front_door_nodes": 1}
BEFORE_SESSION = {
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager",
    "fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.LocalFs",
    "spark.sql.shuffle.partitions": "2",
}
# Before the front-door rows, Java's defaults through the front door, unmeasured, for this long: a freshly
# started gateway's JVM spends half its CPU in HotSpot's compilers, and the same row ran 2.1x faster after
# 90 s of it (2 275 -> 4 794 records/s, micro-batch 1.05 -> 0.46 s; 2026-11-26). A gateway runs for months,
# so its users meet the warm figure; each warm-up pass is printed, so the cold one is not hidden.
WARM_UP_S = 90.0
# ... and on until a pass's JIT compilers use under `JIT_SETTLED_CORES` of the Spark JVM's cores, for at most
# `WARM_UP_MAX_S`: at 90 s they still took 0.29-0.37 of a core (of 2) and fell to ~0.1 within minutes.
JIT_SETTLED_CORES = 0.1
WARM_UP_MAX_S = 300.0
BEFORE_ROWS = ("Java ProducerPerformance, defaults", "librdkafka, idempotent, linger 5 ms",
               "librdkafka, one at a time, linger 0 ms")
# The rows compared with the gateway's own backlog, each also with the backlog drained while their
# records/s go to Kafka beside it (`tests.bench_beside`): what the machine leaves a front door moving that much.
BESIDE_ROWS = ("Java ProducerPerformance, documented settings", "librdkafka, documented settings",
               "librdkafka, documented settings, not idempotent",
               "Java, documented large-batch settings", "librdkafka, documented large-batch settings")
# ... sent by Java's producer with the large-batch settings, the least client CPU per record of the clients
# measured (0.2-0.3 of a core at 280-390 k records/s), to the anchor topic that takes them.
BESIDE_TRAFFIC = Traffic(dict(ACKS_ALL + JAVA_LARGE_PROPS), CLIENT_LARGE_ANCHOR_TOPIC, RECORD_SIZE)


def row_deadline_s(quick: bool) -> float:
    """A row that has not finished by then is stopped (its subprocess killed) and reported as such."""
    return 240.0 if quick else 600.0


def _java_row(name: str, run: PerfRun, records: int, micro_batch_s: list[float]) -> Row:
    s = run.summary
    problems = run.problems()
    note = "; ".join(problems)
    if s is None:
        return Row(name, micro_batch_s=micro_batch_s, note=note or "no summary")
    return Row(name, s.records_per_s, s.records_per_s * RECORD_SIZE / 1e6, micro_batch_s=micro_batch_s,
               latency_pcts=s.percentiles_ms, note=f"{s.records}/{records} records" + (f"; {note}" if note else ""))


class ClientRun:
    """Runs one setting's row against a bootstrap address, printing whatever went wrong."""

    def __init__(self, work: Path, quick: bool) -> None:
        self.work = work
        self.quick = quick
        self.runs = 0

    def row(self, setting: ClientSetting, where: str, bootstrap: str, topic: str,
            micro_batches: Callable[[], list[float]] = list) -> Row:
        name = f"{where}: {setting.name}"
        records, deadline = setting.records(self.quick), row_deadline_s(self.quick)
        self.runs += 1
        try:
            if setting.client == "java":
                run = run_producer_performance(bootstrap, topic, records, RECORD_SIZE, setting.config(),
                                               self.work, deadline, name=f"perf-{self.runs}")
                for line in run.problems():
                    print(f"  {name}: {line}")
                if run.problems():
                    print(f"    stdout: {run.stdout_tail!r}\n    stderr: {run.stderr_tail!r}\n    client log: {run.log_file}")
                return _java_row(name, run, records, micro_batches())
            mode = "send-and-wait" if setting.client == "send-and-wait" else "produce"
            d = run_in_own_process(mode, self.work / f"librdkafka-{self.runs}", bootstrap, topic,
                                   setting.config(), records, RECORD_SIZE, deadline)
            for line in d.problems():
                print(f"  {name}: {line}")
            note = "requests one at a time" if setting.client == "send-and-wait" else ""
            return deliveries_row(name, d, RECORD_SIZE, note, micro_batches())
        except Exception as e:  # reported, never raised: the other rows still run
            print(f"  {name}: failed: {e!r}")
            traceback.print_exc(limit=3)
            return Row(name, note=f"failed: {e!r}"[:200])


def _warm_up(runner: ClientRun, bootstrap: str, query: Any, jvm_pid: int) -> None:
    """Java's defaults (their --quick size) through the front door until `WARM_UP_S` has passed and a pass's
    JIT share is under `JIT_SETTLED_CORES`, or `WARM_UP_MAX_S` has passed; each pass printed with the Spark
    JVM's cores and its compilers' share."""
    java_defaults = replace(JAVA_DEFAULTS, name=f"{JAVA_DEFAULTS.name} (warm-up)",
                            records_full=JAVA_DEFAULTS.records_quick)
    print(f"  warming the gateway's JVM for {WARM_UP_S:.0f} s, then until its compilers use under "
          f"{JIT_SETTLED_CORES} of a core (at most {WARM_UP_MAX_S:.0f} s), with {java_defaults.name}:")
    began, jit_cores = time.monotonic(), 1.0
    while (elapsed := time.monotonic() - began) < WARM_UP_S or (jit_cores >= JIT_SETTLED_CORES
                                                                 and elapsed < WARM_UP_MAX_S):
        start, cpu, last = time.monotonic(), jvm_cpu(jvm_pid), _last_batch(query)
        row = runner.row(java_defaults, "front door", bootstrap, java_defaults.topic(),
                         partial(_progress_since, query, last))
        after, seconds = jvm_cpu(jvm_pid), time.monotonic() - start
        if cpu is None or after is None:
            jit_cores = 0.0  # no /proc: the time bound alone
        else:
            jit_cores = after.since(cpu).jit_s / seconds
        row = _with_jvm_cpu(row, jvm_pid, cpu, seconds)
        print(f"    at {start - began:3.0f} s: {row.records_per_s or 0:,.0f} records/s, micro-batch p50 "
              f"{quantile(row.micro_batch_s, .5) or 0:.3f} s; {row.note}")
        if row.records_per_s is None:
            return  # the client failed (printed by the runner): the rows will say why


def _with_jvm_cpu(row: Row, pid: int, before: JvmCpu | None, seconds: float) -> Row:
    """The row with the Spark JVM's cores over it in its note, its JIT compilers' apart (`tests.jvm_threads`)."""
    after = jvm_cpu(pid)
    if before is None or after is None:
        return row
    cores = describe(after.since(before), seconds)
    return replace(row, note=f"{row.note}; {cores}" if row.note else cores)


def _progress_since(query: Any, after_batch: int, wait_s: float = 30.0) -> list[float]:
    """Durations of the micro-batches with data after `after_batch`. Waits first for the trigger in flight
    to end: the last records' delivery reports come from inside the micro-batch that appended them,
    before Spark records its progress."""
    deadline = time.monotonic() + wait_s
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p["durationMs"]["triggerExecution"] / 1000 for p in query.recentProgress
            if p["batchId"] > after_batch and p["numInputRows"] > 0]


def _last_batch(query: Any) -> int:
    last = query.lastProgress
    return int(last["batchId"]) if last else -1


def bench_clients(stack: Stack, quick: bool, backlog: Row | None,
                  settings: Sequence[ClientSetting] = SETTINGS) -> list[Row]:
    """The clients section: its table and ratio lines, printed; the rows returned."""
    trigger = stack.config("clients-probe").trigger_interval
    print(f"\n== Kafka clients: {KAFKA_VERSION} broker vs the gateway's front door (trigger {trigger}), one "
          f"LogAppendTime topic with {CLIENT_PARTITIONS} partitions, {RECORD_SIZE} B values, no key, acks=all, "
          f"one producer; latency = send -> delivery report; MB/s = record values ==")
    runner = ClientRun(stack.work / "clients", quick)
    kafka = {s.name: _with_ledger(stack, s, runner.quick, partial(runner.row, s, "Kafka",
                                                                  stack.broker.bootstrap_servers, s.anchor_topic()))
             for s in settings}
    door: dict[str, Row] = {}
    probe = RoundTripProbe()
    try:
        with collected_warnings() as warnings, gateway_with_front_door(stack, probe=probe) as (bootstrap, query):
            assert stack.spark is not None
            jvm_pid = stack.spark_pid()
            _warm_up(runner, bootstrap, query, jvm_pid)
            for s in settings:
                seen, before = len(warnings), _last_batch(query)
                probe.reset()
                began, cpu = time.monotonic(), jvm_cpu(jvm_pid)
                row = _with_ledger(stack, s, runner.quick, partial(runner.row, s, "front door", bootstrap, s.topic(),
                                                                   partial(_progress_since, query, before)))
                door[s.name] = _with_jvm_cpu(row, jvm_pid, cpu, time.monotonic() - began)
                if s.client == "send-and-wait" and door[s.name].latency_ms:
                    print_round_trip(probe, [p for p in query.recentProgress
                                             if p["batchId"] > before and p["numInputRows"] > 0],
                                     door[s.name].latency_ms)
                if len(warnings) > seen:
                    print(f"  front door: {s.name}: {len(warnings) - seen} warnings logged, e.g.")
                    for line in list(dict.fromkeys(warnings[seen:]))[:3]:
                        print(f"    {line[:300]}")
            if query.exception() is not None:
                print(f"  gateway query failed: {query.exception()}")
    except Exception as e:  # the gateway or its front door did not start or stop cleanly
        print(f"  front door rows: failed: {e!r}")
        traceback.print_exc(limit=5)
    before = _before_rows(stack, runner, [s for s in settings if s.name in BEFORE_ROWS])
    beside = _beside_rows(stack, quick, door) if backlog is not None else {}
    rows: list[Row] = []
    for s in settings:
        rows.append(kafka[s.name])
        if s.name in before:
            rows.append(before[s.name])
        rows.append(door.get(s.name) or Row(f"front door: {s.name}", note="not run"))
    if backlog is not None:
        rows.append(Row(f"gateway's own backlog ({backlog.name})", backlog.records_per_s, None, (),
                        backlog.micro_batch_s, note=f"same run; {backlog.note}"))
    rows += [row for pair in beside.values() for row in pair]
    print()
    print_table(rows, tail=True)
    print("\nratios, front door / Kafka with the same client settings (records/s; latency p50, p99):")
    for s in settings:
        k, f = kafka[s.name], door.get(s.name)
        if f is None:
            continue
        print(f"  {s.name:48} {ratio(f.records_per_s, k.records_per_s):>8}   "
              f"p50 {ratio(f.latency_at(.5), k.latency_at(.5)):>8}   p99 {ratio(f.latency_at(.99), k.latency_at(.99)):>8}")
    if before:
        print("\nratios, front door now / before (records/s; latency p50, p99):")
        for name, b in before.items():
            f = door.get(name)
            if f is not None:
                print(f"  {name:48} {ratio(f.records_per_s, b.records_per_s):>8}   "
                      f"p50 {ratio(f.latency_at(.5), b.latency_at(.5)):>8}   p99 {ratio(f.latency_at(.99), b.latency_at(.99)):>8}")
    if backlog is not None:
        print(f"\nratios, front door / the gateway's own backlog ({backlog.records_per_s or 0:,.0f} records/s, same run):")
        for s in settings:
            f = door.get(s.name)
            if f is not None and s.client != "send-and-wait":
                print(f"  {s.name:48} {ratio(f.records_per_s, backlog.records_per_s):>8}")
    if beside:
        print("\nratios, front door / the gateway's backlog with the row's records/s sent to Kafka beside it "
              "(and that backlog / the backlog alone, drained beside it):")
        for name, (alone, with_traffic) in beside.items():
            print(f"  {name:48} {ratio(door[name].records_per_s, with_traffic.records_per_s):>8}   "
                  f"({ratio(with_traffic.records_per_s, alone.records_per_s)})")
    print_cpu(rows)
    if beside:
        print("\nper record, CPU of the gateway's side (Spark JVM, Python workers, broker, driver + front door) through "
              "the front door / in the backlog alone, and the client's share of the front-door row's busy CPU:")
        for name, (alone, _) in beside.items():
            door_cpu, alone_cpu = door[name].cpu, alone.cpu
            if door_cpu is None or alone_cpu is None or door_cpu.window.used is None:
                continue
            serving = ratio(door_cpu.per_record_us(lambda u: u.serving), alone_cpu.per_record_us(lambda u: u.serving))
            client = ratio(door_cpu.window.used.clients, door_cpu.window.used.busy)
            print(f"  {name:48} {serving:>8}   client {client}")
    return rows


def _with_ledger(stack: Stack, setting: ClientSetting, quick: bool, run: Callable[[], Row]) -> Row:
    """`run`'s row with the machine's CPU over it, per record the setting sends."""
    with stack.cpu_measured() as window:
        row = run()
    return replace(row, cpu=RowCpu(window, setting.records(quick)))


def _beside_rows(stack: Stack, quick: bool, door: dict[str, Row]) -> dict[str, tuple[Row, Row]]:
    """For each of `BESIDE_ROWS`, the backlog row's drain alone and with the row's records/s sent to Kafka beside
    it, one after the other, the order alternating from row to row (a JVM still warming favours the second)."""
    payloads, per_trigger = backlog_payloads(quick)
    pairs: dict[str, tuple[Row, Row]] = {}
    for i, name in enumerate(n for n in BESIDE_ROWS if n in door and door[n].records_per_s):
        runs = {
            "alone": partial(_drained, stack, f"gateway's backlog alone, paired with {name}", payloads, per_trigger),
            "beside": partial(backlog_beside, stack, BESIDE_TRAFFIC, door[name].records_per_s or 0, payloads,
                              per_trigger, stack.work / "beside"),
        }
        done = {kind: runs[kind]() for kind in (("alone", "beside") if i % 2 == 0 else ("beside", "alone"))}
        pairs[name] = (done["alone"], done["beside"])
    return pairs


def _drained(stack: Stack, name: str, payloads: list[tuple[str, int, bytes]], per_trigger: int) -> Row:
    return drain_row(name, stack.drain("gateway", payloads, per_trigger), payloads)


def _before_rows(stack: Stack, runner: ClientRun, settings: Sequence[ClientSetting]) -> dict[str, Row]:
    """The `BEFORE_ROWS` through the baseline front door (`BEFORE_CONFIG`)."""
    assert stack.spark is not None
    saved = {k: stack.spark.conf.get(k, None) for k in BEFORE_SESSION}
    rows: dict[str, Row] = {}
    try:
        for key, value in BEFORE_SESSION.items():
            stack.spark.conf.set(key, value)
        with gateway_with_front_door(stack, **BEFORE_CONFIG) as (bootstrap, query):
            for s in settings:
                row = runner.row(s, "front door before", bootstrap, s.topic(),
                                 partial(_progress_since, query, _last_batch(query)))
                rows[s.name] = row
    except Exception as e:  # reported, never raised
        print(f"  front door before: failed: {e!r}")
    finally:
        for key, value in saved.items():
            stack.spark.conf.unset(key) if value is None else stack.spark.conf.set(key, value)
    return rows


def backlog_row(stack: Stack, quick: bool, now_ms: int | None = None) -> Row:
    """The gateway's own throughput on the same machine: the bench's 100 x 100 B backlog row, for the
    ratio when the clients' rows run alone (`--only clients`)."""
    payloads, per_trigger = backlog_payloads(quick, now_ms)
    return _drained(stack, f"gateway ({BACKLOG_WORKLOAD.name})", payloads, per_trigger)


BACKLOG_WORKLOAD = Workload("100 x 100 B, none")


def backlog_payloads(quick: bool, now_ms: int | None = None) -> tuple[list[tuple[str, int, bytes]], int]:
    """The backlog row's batches (4 micro-batches' worth) and its batches per micro-batch."""
    per_trigger = 1_000 if quick else 10_000
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    return BACKLOG_WORKLOAD.batches(4 * per_trigger, 4, now_ms), per_trigger
