"""Storage fidelity of transactions: segments the gateway wrote for committed and aborted transactions (control
batches, `.txnindex` files, across rolled segments) given to an Apache Kafka broker in place of a partition's
own, their `.txnindex` files left out. The broker recovers them as after a crash (`LogSegment.recover` rebuilds
every index and the transaction index from the log), and must then hold the same `.txnindex` bytes as the
gateway wrote, serve a read_committed consumer exactly the committed records, and a read_uncommitted one every
record."""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from embedded.local_kafka import LocalKafka
from sinks.partition_task import append_partition
from storage.file_names import TXN_INDEX_FILE_SUFFIX, partition_dir
from streaming.stage import IngressBatch, decide_group
from validators.append_result import PartitionState
from validators.codec.control_batch import ControlRecordType, EndTransactionMarker, build_end_txn_marker
from validators.codec.record_batch import build_record_batch
from validators.topic_config import TopicRegistry, topic_config

pytestmark = pytest.mark.integration

# an index entry per batch and 30 time-index slots: a segment rolls every 30 batches or so
CONFIGS = {"message.timestamp.type": "CreateTime", "index.interval.bytes": "1", "segment.index.bytes": "360"}
SEGMENT_FILES = (".log", ".index", ".timeindex", TXN_INDEX_FILE_SUFFIX)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    kafka = LocalKafka(tmp_path_factory.mktemp("txn-storage-kafka")).start()
    yield kafka
    kafka.stop()


def _workload(now: int) -> tuple[list[list[IngressBatch]], list[bytes], list[bytes]]:
    """Micro-batches of ingress messages: three producers' transactions, committed and aborted, interleaved with
    plain batches; and the values read_committed and read_uncommitted consumers must see."""
    offset, micro_batches, committed, every = 0, [], [], []
    sequences = {7: 0, 8: 0, 9: 0}

    def item(batch: bytes, txn: bool = False, marker: bool = False) -> IngressBatch:
        nonlocal offset
        offset += 1
        return IngressBatch(0, offset, now, batch, f"r{offset}", None, -1, "0",
                            transactional_id="tx" if txn else None, origin="coordinator" if marker else None)

    for round_ in range(10):
        items = []
        open_values: dict[int, list[bytes]] = {}
        for pid in (7, 8, 9):
            for n in range(3):
                values = [f"p{pid}-r{round_}-{n}-{i}".encode() for i in range(3)]
                batch = build_record_batch([(now, b"k", v) for v in values], producer_id=pid, producer_epoch=0,
                                           base_sequence=sequences[pid], is_transactional=True)
                sequences[pid] += 3
                items.append(item(batch, txn=True))
                open_values.setdefault(pid, []).extend(values)
                every.extend(values)
            plain = f"plain-r{round_}-{pid}".encode()
            items.append(item(build_record_batch([(now, b"k", plain)])))
            committed.append(plain)
            every.append(plain)
        for pid in (7, 8, 9):
            commit = (pid + round_) % 3 != 0
            kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
            items.append(item(build_end_txn_marker(EndTransactionMarker(kind, 0), producer_id=pid, producer_epoch=0,
                                                   timestamp=now), marker=True))
            if commit:
                committed.extend(open_values[pid])
        micro_batches.append(items)
    return micro_batches, committed, every


def _consume(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                         "isolation.level": isolation, "enable.partition.eof": True, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values = []
        while True:
            msg = consumer.poll(30)
            assert msg is not None, f"nothing within 30 s after {len(values)} records"
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                return values
            values.append(msg.value())
    finally:
        consumer.close()


def test_kafka_serves_the_gateways_transactions_as_the_gateway_wrote_them(broker: LocalKafka, tmp_path: Path) -> None:
    topic = f"txstore-{uuid.uuid4().hex[:8]}"
    broker.create_topics([(topic, 1, CONFIGS)])
    registry = TopicRegistry({topic: topic_config(topic, 1, CONFIGS)})
    micro_batches, committed, every = _workload(int(time.time() * 1000))
    state = PartitionState()
    for batch_id, items in enumerate(micro_batches):
        rows, state = decide_group(topic, 0, items, registry, state, int(time.time() * 1000))
        assert all(r.error_code == 0 for r in rows), [r.error_message for r in rows if r.error_code]
        append_partition(tmp_path, batch_id, rows, registry)
    ours = partition_dir(tmp_path, topic, 0)
    txn_indexes = {p.name: p.read_bytes() for p in ours.glob(f"*{TXN_INDEX_FILE_SUFFIX}")}
    assert len(list(ours.glob("*.log"))) >= 3 and len(txn_indexes) >= 2  # rolled, aborts in several segments

    # the broker's partition replaced by the gateway's segments, without their transaction indexes and without a
    # clean-shutdown marker: Kafka recovers every segment and rebuilds the indexes from the log bytes alone
    broker.stop()
    theirs = broker.log_dir / f"{topic}-0"
    for path in theirs.iterdir():
        if path.suffix in SEGMENT_FILES or path.name.endswith(".snapshot"):
            path.unlink()
    for path in ours.iterdir():
        if path.suffix in SEGMENT_FILES and path.suffix != TXN_INDEX_FILE_SUFFIX:
            shutil.copy(path, theirs / path.name)
    (broker.log_dir / ".kafka_cleanshutdown").unlink()
    broker.start()

    assert sorted(_consume(broker.bootstrap_servers, topic, "read_committed")) == sorted(committed)
    assert _consume(broker.bootstrap_servers, topic, "read_uncommitted") == every
    # Kafka's recovery rebuilt each segment's transaction index from the log: the gateway's, byte for byte (and
    # without them read_committed would have shown the aborted records)
    rebuilt = {p.name: p.read_bytes() for p in theirs.glob(f"*{TXN_INDEX_FILE_SUFFIX}") if p.stat().st_size}
    assert rebuilt == txn_indexes
