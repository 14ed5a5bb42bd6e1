"""Transactions in cluster mode (`bmq broker` x 3 on shared storage, ZooKeeper, a controller):
the transaction coordinator is the owner of the transactional id's ``__transaction_state``
partition; markers reach partitions other brokers own through WriteTxnMarkers; a produce to a
partition on another broker than the coordinator is verified with the coordinator (KIP-890
part 1); the coordinator's state moves with a failover, and a new owner finishes what a killed
one had decided."""

from __future__ import annotations

import contextlib
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bmq.coordinators.transactions.core import CRASH_ENV
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import EndTxnRequest, FindCoordinatorRequest
from tests.cluster.conftest import (
    ClusterFactory,
    SharedStorage,
    cluster_factory,
    shared_storage,
    zookeeper,
)
from tests.groups.wire import RawClient
from tests.integration.helpers import watermarks
from tests.proxy.conftest import Proxies, proxies
from tests.transactions.helpers import read_values, txn_producer
from tests.transactions.test_wire import TXN_ID, _add, _init, _produce

__all__ = ["cluster_factory", "proxies", "shared_storage", "zookeeper"]

PARTITIONS = 6
TXN_ENV: dict[str, Any] = {
    "BMQ_TRANSACTION_STATE_LOG_NUM_PARTITIONS": 6,
    "BMQ_TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS": 200,
}


def _topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)


def _transactions(bootstrap: str, topic: str, txn_id: str) -> None:
    """One committed and one aborted transaction over every partition."""
    producer = txn_producer(bootstrap, txn_id)
    producer.init_transactions(60)
    for outcome in ("commit", "abort"):
        producer.begin_transaction()
        for p in range(PARTITIONS):
            producer.produce(topic, f"{outcome}-{p}".encode(), partition=p)
        producer.flush(30)
        if outcome == "commit":
            producer.commit_transaction(60)
        else:
            producer.abort_transaction(60)


def _check_transactions(bootstrap: str, topic: str) -> None:
    """What ``_transactions`` left: read_committed consumers see the committed transaction's
    records only, read_uncommitted ones the aborted transaction's too."""
    committed = sorted(f"commit-{p}" for p in range(PARTITIONS))
    assert sorted(read_values(bootstrap, topic, PARTITIONS, "read_committed")) == committed
    assert sorted(read_values(bootstrap, topic, PARTITIONS, "read_uncommitted")) == \
        sorted(committed + [f"abort-{p}" for p in range(PARTITIONS)])


@pytest.mark.parametrize("shared_storage", ["file", "s3", "hdfs"], indirect=True)
def test_a_transaction_over_partitions_of_every_broker_commits_atomically(
        cluster_factory: ClusterFactory, shared_storage: SharedStorage) -> None:
    cluster = cluster_factory(brokers=3, storage=shared_storage, env=TXN_ENV)
    _topic(cluster.bootstrap, "txc")
    cluster.wait_writable("txc")
    assert set(cluster.owners("txc").values()) == {1, 2, 3}
    _transactions(cluster.bootstrap, "txc", "txc-" + uuid.uuid4().hex[:6])
    _check_transactions(cluster.bootstrap, "txc")


def test_consume_transform_produce_across_brokers(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=3, env=TXN_ENV)
    bootstrap = cluster.bootstrap
    _topic(bootstrap, "ctp-in", 3)
    _topic(bootstrap, "ctp-out", 3)
    cluster.wait_writable("ctp-in")
    cluster.wait_writable("ctp-out")
    feeder = txn_producer(bootstrap, "feeder")
    feeder.init_transactions(60)
    feeder.begin_transaction()
    for i in range(90):
        feeder.produce("ctp-in", f"in-{i}".encode(), partition=i % 3)
    feeder.commit_transaction(60)

    group = "ctp-" + uuid.uuid4().hex[:6]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["ctp-in"])
    producer = txn_producer(bootstrap, "processor-" + group)
    producer.init_transactions(60)
    done = 0
    deadline = time.monotonic() + 60
    while done < 90 and time.monotonic() < deadline:
        messages = consumer.consume(30, timeout=1)
        if not messages:
            continue
        producer.begin_transaction()
        for message in messages:
            assert message.error() is None, message.error()
            producer.produce("ctp-out", message.value().upper(), partition=message.partition())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(60)
        done += len(messages)
    consumer.close()
    assert done == 90
    out = read_values(bootstrap, "ctp-out", 3, "read_committed")
    assert sorted(out) == sorted(f"IN-{i}" for i in range(90))
    # The group's offsets committed with the transactions: a new member starts at the end.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    offsets = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition("ctp-in", p) for p in range(3)])])
    listed = offsets[group].result(30).topic_partitions
    # 30 inputs per partition, then the feeder's COMMIT marker (position 30 or, once the
    # consumer fetched past the marker, 31).
    assert all(tp.offset in (30, 31) for tp in listed), listed


@pytest.mark.slow
def test_coordinator_killed_between_decision_and_markers(
        cluster_factory: ClusterFactory, shared_storage: SharedStorage) -> None:
    """kill -9 of the coordinator's broker once PrepareCommit is durable, before any marker
    (every broker has the crash hook armed; only a coordinator ending a transaction reaches
    it): its partitions move, the new coordinator writes the markers, and the transaction is
    committed; read_committed consumers are not stuck behind it."""
    env = {**TXN_ENV, CRASH_ENV: "after_prepare_commit"}
    cluster = cluster_factory(brokers=3, storage=shared_storage, env=env)
    _topic(cluster.bootstrap, "txk")
    cluster.wait_writable("txk")
    producer = txn_producer(cluster.bootstrap, "txk-" + uuid.uuid4().hex[:6])
    producer.init_transactions(60)
    producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce("txk", f"decided-{p}".encode(), partition=p)
    producer.flush(30)
    with contextlib.suppress(KafkaException):
        producer.commit_transaction(30)    # its coordinator dies under it; the decision holds
    dead = [b for b in cluster.brokers.values() if not b.is_running()]
    assert len(dead) == 1, "the coordinator's broker did not reach the crash point"
    values = read_values(cluster.bootstrap, "txk", PARTITIONS, "read_committed", timeout=60,
                         until=PARTITIONS)
    assert sorted(values) == sorted(f"decided-{p}" for p in range(PARTITIONS))


def _produce_verified(client: RawClient, topic: str, partition: int, pid: int, epoch: int,
                      sequence: int, timeout_s: float = 20.0) -> int:
    """``_produce`` retried, as a client retries, while the owner cannot ask the coordinator
    yet (NOT_ENOUGH_REPLICAS, KIP-890's retriable answer: the owner may not have seen where
    __transaction_state's partitions went; nothing is written meanwhile)."""
    deadline = time.monotonic() + timeout_s
    while True:
        code = _produce(client, topic, partition, pid, epoch, sequence)
        if code != ErrorCode.NOT_ENOUGH_REPLICAS or time.monotonic() > deadline:
            return code
        time.sleep(0.2)


def test_a_produce_to_a_partition_not_added_is_refused_on_any_broker(
        cluster_factory: ClusterFactory) -> None:
    """KIP-890 part 1 across brokers: the partition's owner asks the coordinator (on another
    broker) and refuses a transactional batch to a partition not in the transaction; nothing
    is written. A partition that was added is accepted, and the commit's marker reaches it."""
    cluster = cluster_factory(brokers=3, env=TXN_ENV)
    _topic(cluster.bootstrap, "txn-wire")
    cluster.wait_writable("txn-wire")
    with RawClient(cluster.brokers[1].bootstrap) as client:
        def find() -> Any:
            answer = client.call(FindCoordinatorRequest(key_type=1, coordinator_keys=[TXN_ID]),
                                 4)
            return answer.coordinators[0]

        # The first ask creates __transaction_state (COORDINATOR_NOT_AVAILABLE until the
        # controller has placed its partitions).
        cluster.wait_for(lambda: find().error_code == ErrorCode.NONE, 30, "a coordinator")
        coordinator = find()
    owners = cluster.owners("txn-wire")
    added, other = [p for p, owner in owners.items() if owner != coordinator.node_id][:2]
    with RawClient(f"{coordinator.host}:{coordinator.port}") as client:
        pid, epoch = _init(client)
        assert _add(client, "txn-wire", [added], pid, epoch) == [ErrorCode.NONE]
    with RawClient(cluster.brokers[owners[other]].bootstrap) as client:
        assert _produce_verified(client, "txn-wire", other, pid, epoch, 0) == \
            ErrorCode.INVALID_TXN_STATE
    with RawClient(cluster.brokers[owners[added]].bootstrap) as client:
        assert _produce_verified(client, "txn-wire", added, pid, epoch, 0) == ErrorCode.NONE
        assert _produce_verified(client, "txn-wire", added, pid, epoch, 1) == ErrorCode.NONE
    with RawClient(f"{coordinator.host}:{coordinator.port}") as client:
        ended = client.call(EndTxnRequest(transactional_id=TXN_ID, producer_id=pid,
                                          producer_epoch=epoch, committed=True), 3)
        assert ended.error_code == ErrorCode.NONE
    assert watermarks(cluster.bootstrap, "txn-wire", other) == (0, 0)
    assert watermarks(cluster.bootstrap, "txn-wire", added) == (0, 3)   # 2 records + marker
    assert read_values(cluster.bootstrap, "txn-wire", PARTITIONS, "read_committed") == \
        ["v", "v"]


def test_transactions_through_a_proxy(cluster_factory: ClusterFactory, proxies: Proxies) -> None:
    """A transactional producer and read_committed consumers that know only a proxy: the
    proxy relays the transaction APIs, forwards the produces, and serves read_committed
    fetches from storage with the owners' LSO and aborted transactions."""
    cluster = cluster_factory(brokers=3, env=TXN_ENV)
    proxy = proxies(cluster)
    _topic(proxy.bootstrap, "txp")
    cluster.wait_writable("txp")
    _transactions(proxy.bootstrap, "txp", "txp-" + uuid.uuid4().hex[:6])
    _check_transactions(proxy.bootstrap, "txp")
