"""What the transaction tests share: transactional producers and reading what a consumer of
each isolation level sees."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from bmq.protocol.messages import DescribeTransactionsRequest
from bmq.protocol.records import CONTROL_ABORT, HEADER_SIZE, control_type, iter_batches
from bmq.storage import PartitionLog, Storage
from tests.groups.wire import RawClient


def txn_producer(bootstrap: str, transactional_id: str, **conf: Any) -> Producer:
    base: dict[str, Any] = {"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                            "transactional.id": transactional_id, "linger.ms": 5}
    base.update({k.replace("_", "."): v for k, v in conf.items()})
    return Producer(base)


def described(bootstrap: str, txn_id: str) -> Any:
    """DescribeTransactions of one id, as the admin API answers it."""
    with RawClient(bootstrap) as client:
        answer = client.call(DescribeTransactionsRequest(transactional_ids=[txn_id]), 0)
    return answer.transaction_states[0]


def read_values(bootstrap: str, topic: str, partitions: int, isolation: str,
                timeout: float = 30, until: int | None = None) -> list[str]:
    """Every value a consumer of ``isolation`` sees from the start up to the end it reports
    (the LSO for read_committed); with ``until``, keep polling until that many are seen."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "broker.address.family": "v4",
        "group.id": "txn-read-" + uuid.uuid4().hex[:8], "isolation.level": isolation,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: list[str] = []
        at_eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(at_eof) == partitions and (until is None or len(values) >= until):
                break
            message = consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                at_eof.add(message.partition())
                continue
            at_eof.discard(message.partition())
            values.append(message.value().decode())
        else:
            raise AssertionError(f"{isolation} read of {topic} timed out with {len(values)}")
        return values
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str, partition: int, isolation: str) -> int:
    """The end offset a consumer of ``isolation`` is told (ListOffsets latest)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-end",
                         "isolation.level": isolation})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10,
                                                  cached=False)[1])
    finally:
        consumer.close()


# Transactions on a compacted topic (tests/transactions/test_compaction.py and the proxy's).
KEYS = 100
ROUNDS = 8          # committed and aborted in turn: the last committed is round 6
FILLER = "f" * 100


def txn_round(producer: Any, topic: str, name: str, commit: bool, keys: int = KEYS) -> None:
    producer.begin_transaction()
    for i in range(keys):
        producer.produce(topic, key=b"key-%03d" % i, value=f"{name}-{i}".encode())
    if commit:
        producer.commit_transaction(30)
    else:
        producer.flush(30)
        producer.abort_transaction(30)


def txn_rounds(bootstrap: str, topic: str) -> tuple[Any, list[str]]:
    """One producer's transactions, committed and aborted in turn, then a committed one of
    fillers that fills the active segment (every round is cleanable); the producer, and what
    a consumer reads of the rounds once the topic is compacted."""
    producer = txn_producer(bootstrap, "compact-" + topic, batch_size=8192)
    producer.init_transactions(30)
    for r in range(ROUNDS):
        txn_round(producer, topic, f"{'commit' if r % 2 == 0 else 'abort'}-{r}", r % 2 == 0)
    producer.begin_transaction()
    for _ in range(300):
        producer.produce(topic, key=b"filler", value=FILLER.encode())
    producer.commit_transaction(30)
    return producer, sorted(f"commit-{ROUNDS - 2}-{i}" for i in range(KEYS))


def abort_markers(storage: Storage, topic: str) -> int:
    """ABORT markers in the partition's log as its owner last published it."""
    reader = PartitionLog.open_reader(storage, topic, 0)
    try:
        assert reader.high_watermark > 0, f"no log of {topic} at {storage.url}"
        count = 0
        offset = reader.log_start_offset
        while offset < reader.high_watermark:
            data = bytes(reader.read(offset, 1 << 20))
            for pos, header in iter_batches(data):
                count += header.is_control and \
                    control_type(data[pos + HEADER_SIZE:pos + header.size]) == CONTROL_ABORT
                offset = header.next_offset
        return count
    finally:
        reader.close()


def read_rounds(bootstrap: str, topic: str, isolation: str) -> tuple[list[str], int]:
    """The values a consumer of ``isolation`` reads from the start, but the fillers, and how
    many fillers it reads (the active segment's are never cleaned)."""
    values = read_values(bootstrap, topic, 1, isolation)
    return sorted(v for v in values if v != FILLER), values.count(FILLER)


def committed_rounds(bootstrap: str, topic: str) -> list[str]:
    """What a read_committed consumer reads, checked against a read_uncommitted one: every
    filler, the same producer's committed records after its aborted transactions, too."""
    values, fillers = read_rounds(bootstrap, topic, "read_committed")
    assert fillers == read_rounds(bootstrap, topic, "read_uncommitted")[1] > 0
    return values
