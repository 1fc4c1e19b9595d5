"""Differential test: the gateway's append decision against a real Apache Kafka 4.2 broker.

Every batch of a deterministic corpus (`batch_corpus.py`, about 500 raw RecordBatch byte strings:
valid, too old, too new, -1 and other negative timestamps, mixed valid/invalid records, the
LogAppendTime bit, bad CRC, count / lastOffsetDelta inconsistencies, baseOffset != 0, oversized and
at-the-limit sizes, every codec valid and with invalid timestamps, broken compressed streams,
hand-made malformed records, null keys on a compacted topic, control bit, transactional bit,
idempotent batches with a negative base sequence and whole idempotent-producer stories, legacy
magic 0/1) is decided twice, one batch at a time, in the same order:

* by Kafka: the bytes are sent **unchanged** to a topic-partition of the session broker (the
  `kafka` fixture) with `tests/kafka_wire.py`: one single-batch **Produce v8** request per batch,
  acks=-1, over one plain TCP connection. Why that client: a normal producer (librdkafka /
  confluent-kafka) builds its own batches, so it could never send a bad CRC, a wrong count, a
  LogAppendTime bit or baseOffset != 0; and v8 is the oldest Produce version whose response carries
  `record_errors` and `error_message` (KIP-467) and the newest non-flexible one (plain fields).
  The broker validates these batches exactly as it does a producer's (origin CLIENT, leader);
* by the gateway: `validators.log_validator.validate_and_assign` on the same bytes, with a
  `TopicConfig` built from the **same topic configs** the Kafka topic was created with (plus, for
  the `lat_full` topic only, the gateway-only `gateway.record.validation=full`), the partition's
  `PartitionState` carried from one `Accepted.state` to the next, and
  `now_ms = int(time.time() * 1000)` read just before the send. Corpus timestamps stay at least 10
  minutes away from every window edge, so the two clocks never change a decision.

Compared for every batch: the error code; the record errors (batch_index list and message text,
the `[lower, upper]` window bounds compared within CLOCK_TOLERANCE_MS since they depend on `now`);
the response error message (`Rejected.response_error_message`; Kafka sends one only with record
errors, None otherwise); `log_start_offset`; for accepted batches the base offset (the gateway's
log end offset must follow Kafka's) and `log_append_time_ms` (-1 on CreateTime topics, or Kafka's
idempotent-duplicate quirk, compared exactly; the append time, within the tolerance, on
LogAppendTime topics). Every disagreement is collected first and reported together in one table;
after one, the gateway's log end offset is re-synchronised to Kafka's (`next_state`) so that it is
not repeated as a cascade of offset differences. A second table checks the corpus itself: Kafka's
code must be the one the corpus predicts for each case (the reference's prediction, corrected in
`batch_corpus.py` where the real broker was seen to differ), so each kind really exercises what it
says.

The one documented difference (docs/design.md: ingress topic): a legacy magic 0/1 message set is rejected by Kafka
4.x at the request level (INVALID_RECORD 87, Produce v3+ allows magic 2 only) but accepted and
up-converted by the gateway. For those batches the test asserts exactly that (Kafka 87, gateway
Accepted) and does not advance the gateway's partition state, so later offsets stay comparable.
"""

from __future__ import annotations

import re
import struct
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass

import pytest

from embedded.local_kafka import LocalKafka
from tests.integration.batch_corpus import INVALID_RECORD, TOPICS, Case, generate_corpus
from tests.kafka_wire import ProduceConnection, ProduceResult
from validators.append_result import Accepted, PartitionState, Rejected
from validators.codec.record_batch import TimestampType
from validators.errors import Errors
from validators.log_validator import validate_and_assign
from validators.topic_config import TopicConfig, topic_config

pytestmark = pytest.mark.integration

CLOCK_TOLERANCE_MS = 10_000  # gateway clock (read before the send) vs the broker's `now`
WINDOW = re.compile(r"The timestamp should be within \[(-?\d+), (-?\d+)\]")
WINDOW_MASK = "The timestamp should be within [<lower>, <upper>]"


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Mismatch:
    index: int
    case: Case
    field: str
    kafka: str
    ours: str


def _code_name(code: int) -> str:
    try:
        return f"{code} {Errors.for_code(code).name}"
    except KeyError:
        return f"{code} ?"


def _short(text: str | None, limit: int = 400) -> str:
    if text is None:
        return "None"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kafka_summary(r: ProduceResult) -> str:
    if r.error_code == 0:
        return f"0 accepted base_offset={r.base_offset} log_append_time_ms={r.log_append_time_ms}"
    first = f"; record_errors[0]={r.record_errors[0]}" if r.record_errors else ""
    return f"{_code_name(r.error_code)} msg={_short(r.error_message, 200)} ({len(r.record_errors)} record errors{first})"


def _ours_summary(ours: Accepted | Rejected | Exception) -> str:
    if isinstance(ours, Exception):
        return f"raised {type(ours).__name__}: {_short(str(ours), 200)}"
    if isinstance(ours, Accepted):
        return f"0 accepted base_offset={ours.base_offset} log_append_time_ms={ours.log_append_time_ms}"
    first = f"; record_errors[0]={ours.record_errors[0]}" if ours.record_errors else ""
    return (f"{ours.error.code} {ours.error.name} msg={_short(ours.message, 200)} "
            f"({len(ours.record_errors)} record errors{first})")


def _split_window(message: str | None) -> tuple[str | None, list[tuple[int, int]]]:
    """The message with the clock-dependent window bounds masked, and the bounds."""
    if message is None:
        return None, []
    return WINDOW.sub(WINDOW_MASK, message), [(int(a), int(b)) for a, b in WINDOW.findall(message)]


def _compare_text(field: str, kafka: str | None, ours: str | None) -> list[tuple[str, str, str]]:
    kafka_masked, kafka_bounds = _split_window(kafka)
    ours_masked, ours_bounds = _split_window(ours)
    if kafka_masked != ours_masked or len(kafka_bounds) != len(ours_bounds):
        return [(field, _short(kafka), _short(ours))]
    for (k_lo, k_hi), (o_lo, o_hi) in zip(kafka_bounds, ours_bounds, strict=True):
        if abs(k_lo - o_lo) > CLOCK_TOLERANCE_MS or abs(k_hi - o_hi) > CLOCK_TOLERANCE_MS:
            return [(f"{field} window bounds", f"[{k_lo}, {k_hi}]", f"[{o_lo}, {o_hi}]")]
    return []


def compare(case: Case, config: TopicConfig, kafka: ProduceResult,
            ours: Accepted | Rejected | Exception) -> list[tuple[str, str, str]]:
    """(field, Kafka's answer, ours) for every disagreement on one batch."""
    if isinstance(ours, Exception):
        return [("error_code", _kafka_summary(kafka), _ours_summary(ours))]
    if case.legacy:  # docs/design.md: ingress topic: the documented difference, asserted explicitly
        rows = []
        if kafka.error_code != INVALID_RECORD:
            rows.append(("legacy: Kafka 4.x rejects magic != 2 with 87", _kafka_summary(kafka), "(expected 87)"))
        if not isinstance(ours, Accepted):
            rows.append(("legacy: gateway accepts and up-converts (docs/design.md: ingress topic)", _kafka_summary(kafka),
                         _ours_summary(ours)))
        return rows
    our_code = 0 if isinstance(ours, Accepted) else ours.error.code
    if our_code != kafka.error_code:
        return [("error_code", _kafka_summary(kafka), _ours_summary(ours))]
    rows: list[tuple[str, str, str]] = []
    our_lso = ours.state.log_start_offset if isinstance(ours, Accepted) else ours.log_start_offset
    if our_lso != kafka.log_start_offset:
        rows.append(("log_start_offset", str(kafka.log_start_offset), str(our_lso)))
    if isinstance(ours, Accepted):
        if ours.base_offset != kafka.base_offset:
            rows.append(("base_offset", str(kafka.base_offset), str(ours.base_offset)))
        if config.message_timestamp_type != TimestampType.LOG_APPEND_TIME:
            if ours.log_append_time_ms != kafka.log_append_time_ms:  # -1, or the duplicate quirk
                rows.append(("log_append_time_ms", str(kafka.log_append_time_ms), str(ours.log_append_time_ms)))
        elif (kafka.log_append_time_ms < 0 or ours.log_append_time_ms < 0
              or abs(kafka.log_append_time_ms - ours.log_append_time_ms) > CLOCK_TOLERANCE_MS):
            rows.append(("log_append_time_ms (LogAppendTime topic)", str(kafka.log_append_time_ms),
                         str(ours.log_append_time_ms)))
        return rows
    kafka_indexes = [e.batch_index for e in kafka.record_errors]
    our_indexes = [e.batch_index for e in ours.record_errors]
    if kafka_indexes != our_indexes:
        rows.append(("record_errors batch_index", str(kafka_indexes), str(our_indexes)))
    else:
        for k, o in zip(kafka.record_errors, ours.record_errors, strict=True):
            rows += _compare_text(f"record_errors[{k.batch_index}].message", k.message, o.message)
    # ProduceResponse ErrorMessage: Kafka sends one only for record validation errors
    rows += _compare_text("error_message", kafka.error_message, ours.response_error_message)
    return rows


def next_state(case: Case, state: PartitionState, kafka: ProduceResult,
               ours: Accepted | Rejected | Exception) -> PartitionState:
    """The gateway's partition state after this batch: `Accepted.state`, re-synchronised to Kafka's
    log end offset after a disagreement, so that one disagreement is reported once rather than as
    a cascade of base-offset differences on every later batch of the partition."""
    if isinstance(ours, Accepted):
        if kafka.error_code != 0:
            return state  # Kafka appended nothing
        return ours.state._replace(log_end_offset=ours.state.log_end_offset + kafka.base_offset - ours.base_offset)
    if kafka.error_code == 0:  # Kafka appended lastOffsetDelta + 1 offsets, the gateway nothing
        last_offset_delta = struct.unpack_from(">i", case.batch, 23)[0]
        return state._replace(log_end_offset=kafka.base_offset + last_offset_delta + 1)
    return state


def _table(rows: list[Mismatch], names: dict[str, str]) -> str:
    lines = []
    for m in rows:
        lines.append(
            f"#{m.index} {m.case.kind} -> {m.case.topic} ({names[m.case.topic]}-{m.case.partition}): {m.case.note}\n"
            f"    {m.field}\n      kafka: {m.kafka}\n      ours:  {m.ours}"
        )
    return "\n".join(lines)


def _summary(outcomes: dict[str, Counter[str]]) -> str:
    return "\n".join(
        f"  {kind:32} {sum(c.values()):4}  Kafka: {', '.join(f'{k} x{n}' for k, n in sorted(c.items()))}"
        for kind, c in sorted(outcomes.items())
    )


def test_gateway_decides_every_batch_like_kafka(kafka: LocalKafka) -> None:
    run = uuid.uuid4().hex[:8]
    names = {key: f"diff-{key}-{run}" for key in TOPICS}
    kafka.create_topics([(names[key], spec.partitions, dict(spec.configs)) for key, spec in TOPICS.items()])
    configs = {key: topic_config(names[key], spec.partitions, {**spec.configs, **spec.gateway_configs}, {})
               for key, spec in TOPICS.items()}
    corpus = generate_corpus(now_ms())

    states: defaultdict[tuple[str, int], PartitionState] = defaultdict(PartitionState)
    mismatches: list[Mismatch] = []
    unexpected: list[Mismatch] = []
    outcomes: defaultdict[str, Counter[str]] = defaultdict(Counter)
    with ProduceConnection(kafka.bootstrap_servers) as conn:
        for index, case in enumerate(corpus):
            tp = (case.topic, case.partition)
            now = now_ms()
            try:
                ours: Accepted | Rejected | Exception = validate_and_assign(
                    case.batch, names[case.topic], case.partition, configs[case.topic], states[tp], now)
            except Exception as exc:  # noqa: BLE001 - a crash is one more disagreement to report
                ours = exc
            theirs = conn.produce(names[case.topic], case.partition, case.batch)

            outcomes[case.kind][_code_name(theirs.error_code)] += 1
            if theirs.error_code != case.expect:
                unexpected.append(Mismatch(index, case, "Kafka's code vs the reference's prediction",
                                           _kafka_summary(theirs), f"predicted {_code_name(case.expect)}"))
            mismatches += [Mismatch(index, case, *row) for row in compare(case, configs[case.topic], theirs, ours)]
            if not case.legacy:
                states[tp] = next_state(case, states[tp], theirs, ours)

    summary = f"{len(corpus)} batches, per kind:\n{_summary(outcomes)}"
    print(summary)  # shown with -s / -rP
    assert not mismatches and not unexpected, (
        f"{summary}\n\n"
        f"{len(mismatches)} disagreement(s) between the gateway and Kafka:\n{_table(mismatches, names)}\n\n"
        f"{len(unexpected)} Kafka answer(s) other than the corpus predicted:\n{_table(unexpected, names)}"
    )
