"""Share groups with ``share.isolation.level=read_committed`` (KIP-932): records are acquired
below the last stable offset only, and the records of aborted transactions and the control
records (transaction markers) are archived, never delivered; transactional confluent-kafka
producers, the share-group APIs over the wire with exact offsets, the ShareConsumer, and a
kill -9 of the broker while a transaction is open."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import AcknowledgeType, Producer

from bmq.protocol.messages import DescribeShareGroupOffsetsRequest
from bmq.protocol.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequestGroup,
)
from tests.groups.wire import RawClient
from tests.share.helpers import SHARE_ENV, create_topic, produce, set_group_configs, unique
from tests.share.test_clients import EARLIEST, share_consumer
from tests.share.test_wire import ACCEPT, acquired, fetch, heartbeat
from tests.transactions.helpers import txn_producer

READ_COMMITTED = {**EARLIEST, "share.isolation.level": "read_committed"}


def _transaction(producer: Producer, values: list[str], topic: str, end: str = "") -> None:
    """One transaction of ``values`` to partition 0, then ``end``: "commit", "abort" or ""
    (left open, its records durable)."""
    producer.begin_transaction()
    for v in values:
        producer.produce(topic, value=v.encode(), partition=0)
    assert producer.flush(30) == 0
    if end == "commit":
        producer.commit_transaction(30)
    elif end == "abort":
        producer.abort_transaction(30)


def _start_offset(client: RawClient, group: str) -> int:
    answer = client.call(DescribeShareGroupOffsetsRequest(groups=[
        DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]), 1)
    return int(answer.groups[0].topics[0].partitions[0].start_offset)


def test_read_committed_acquires_no_open_aborted_or_control_record(share_broker: Any) -> None:
    """Offsets 0-2 aborted (ABORT marker 3), 4 plain, 5-6 committed (COMMIT marker 7), 8-9 an
    open transaction, 10 plain. A read_committed group acquires 4-6 (the LSO is 8); once the
    open transaction commits (marker 11), 8-10; its start offset then passes every marker.
    A read_uncommitted group acquires everything up to the high watermark, as before."""
    bootstrap = share_broker.bootstrap
    topic, committed, uncommitted = unique("rc"), unique("g"), unique("g")
    create_topic(bootstrap, topic, 1)
    set_group_configs(bootstrap, committed, READ_COMMITTED)
    set_group_configs(bootstrap, uncommitted, EARLIEST)
    first = txn_producer(bootstrap, unique("txn"))
    first.init_transactions(30)
    _transaction(first, ["a0", "a1", "a2"], topic, "abort")
    produce(bootstrap, topic, 1)
    _transaction(first, ["c0", "c1"], topic, "commit")
    second = txn_producer(bootstrap, unique("txn"))
    second.init_transactions(30)
    _transaction(second, ["o0", "o1"], topic)
    produce(bootstrap, topic, 1)
    with RawClient(bootstrap) as client:
        topic_id = heartbeat(client, committed, "a", 0, [topic]).assignment \
            .topic_partitions[0].topic_id
        heartbeat(client, uncommitted, "u", 0, [topic])
        assert acquired(fetch(client, uncommitted, "u", 0, topic_id)) == [(0, 10, 1)]
        assert acquired(fetch(client, committed, "a", 0, topic_id)) == [(4, 6, 1)]
        assert acquired(fetch(client, committed, "a", 1, topic_id, [(4, 6, ACCEPT)],
                              wait_ms=300)) == []
        second.commit_transaction(30)
        assert acquired(fetch(client, committed, "a", 2, topic_id, wait_ms=5000)) == \
            [(8, 10, 1)]
        assert acquired(fetch(client, committed, "a", 3, topic_id, [(8, 10, ACCEPT)],
                              wait_ms=300)) == []
        assert _start_offset(client, committed) == 12


def test_a_share_consumer_at_read_committed(share_broker: Any) -> None:
    """confluent-kafka's ShareConsumer of a read_committed group receives no record of an
    aborted transaction, and those of an open one only after it commits."""
    received = share_consumer_reads_committed(share_broker.bootstrap)
    assert received == ["plain-0", "open-0", "open-1", "plain-1"]


def share_consumer_reads_committed(bootstrap: str) -> list[str]:
    """An aborted and an open transaction, around plain records: what a ShareConsumer of a
    read_committed group receives (each record once, in offset order) before and after the
    open one commits."""
    topic, group = unique("rc"), unique("g")
    create_topic(bootstrap, topic, 1)
    set_group_configs(bootstrap, group, READ_COMMITTED)
    aborting, opened = (txn_producer(bootstrap, unique("txn")) for _ in range(2))
    aborting.init_transactions(30)
    opened.init_transactions(30)
    plain = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    plain.produce(topic, value=b"plain-0", partition=0)
    assert plain.flush(30) == 0
    _transaction(aborting, ["aborted-0", "aborted-1"], topic, "abort")
    _transaction(opened, ["open-0", "open-1"], topic)
    plain.produce(topic, value=b"plain-1", partition=0)       # past the LSO until the commit
    assert plain.flush(30) == 0
    consumer = share_consumer(bootstrap, group, topic)
    received: list[str] = []

    def poll(seconds: float, until: int) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and len(received) < until:
            for m in consumer.poll(0.3):
                assert m.delivery_count() == 1, m.offset()
                received.append(m.value().decode())
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            consumer.commit_sync()

    try:
        poll(30, 1)
        poll(2, 2)         # nothing more while the transaction is open
        assert received == ["plain-0"]
        opened.commit_transaction(30)
        poll(30, 4)
        poll(1, 5)         # and nothing twice
    finally:
        consumer.close()
    return received


def test_kill_9_with_a_transaction_open(broker_factory: Any) -> None:
    """The last stable offset is recovered with the log: after a kill -9 the group still
    acquires nothing of the open transaction, and its records once it commits."""
    broker = broker_factory(env=SHARE_ENV)
    topic, group = unique("rc-crash"), unique("g")
    create_topic(broker.bootstrap, topic, 1)
    set_group_configs(broker.bootstrap, group, READ_COMMITTED)
    produce(broker.bootstrap, topic, 1)
    producer = txn_producer(broker.bootstrap, unique("txn"))
    producer.init_transactions(30)
    _transaction(producer, ["o0", "o1"], topic)
    with RawClient(broker.bootstrap) as client:
        topic_id = heartbeat(client, group, "a", 0, [topic]).assignment \
            .topic_partitions[0].topic_id
        assert acquired(fetch(client, group, "a", 0, topic_id)) == [(0, 0, 1)]
        assert acquired(fetch(client, group, "a", 1, topic_id, [(0, 0, ACCEPT)])) == []
    broker.kill()
    broker.start()
    member = "b"
    with RawClient(broker.bootstrap) as client:
        heartbeat(client, group, member, 0, [topic])
        assert acquired(fetch(client, group, member, 0, topic_id, wait_ms=500)) == []
        producer.commit_transaction(60)
        assert acquired(fetch(client, group, member, 1, topic_id, wait_ms=5000)) == \
            [(1, 2, 1)]
