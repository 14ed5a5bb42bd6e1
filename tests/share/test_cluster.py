"""Share groups in cluster mode (`bmq broker` x 3 on S3 or HDFS, ZooKeeper, a controller) with
confluent-kafka's ShareConsumer: the leader of a data partition keeps its share-partitions and
writes their state through the share coordinator (the owner of the key's
``__share_group_state`` partition, FindCoordinator key type 2); when the leader is killed
(kill -9) the new one continues from the durable state."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType

from bmq.coordinators.placement import partition_for
from bmq.metadata.topics import OFFSETS_TOPIC
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    AlterShareGroupOffsetsRequest,
    DeleteGroupsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    FindCoordinatorRequest,
    MetadataRequest,
)
from bmq.protocol.messages.alter_share_group_offsets_request import (
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from bmq.protocol.messages.delete_share_group_offsets_request import (
    DeleteShareGroupOffsetsRequestTopic,
)
from bmq.protocol.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from bmq.protocol.messages.metadata_request import MetadataRequestTopic
from tests.cluster.conftest import (
    ClusterFactory,
    SharedStorage,
    cluster_factory,
    shared_storage,
    zookeeper,
)
from tests.groups.wire import RawClient
from tests.share.helpers import (
    SHARE_ENV,
    ShareWorker,
    create_dead_letter_topic,
    create_topic,
    produce,
    set_group_configs,
    unique,
    wait_for,
)
from tests.share.test_clients import EARLIEST, _dead_letters, share_consumer
from tests.share.test_read_committed import share_consumer_reads_committed
from tests.share.test_wire import ACCEPT, acknowledge, acquired, fetch, heartbeat

__all__ = ["cluster_factory", "shared_storage", "zookeeper"]


@pytest.mark.parametrize("shared_storage", ["s3", "hdfs"], indirect=True)
def test_the_leader_of_a_share_partition_is_killed(
        cluster_factory: ClusterFactory, shared_storage: SharedStorage,
        workers: list[ShareWorker]) -> None:
    """Acknowledgements answered before the kill hold after it (group ``acks``: none of its
    records comes back); records acquired and not acknowledged are delivered again by the new
    leader with their delivery count (group ``held``); no record is lost."""
    cluster = cluster_factory(brokers=3, storage=shared_storage, env=SHARE_ENV)
    topic, acks, held = unique("cshare"), unique("acks"), unique("held")
    create_topic(cluster.bootstrap, topic, 1)
    cluster.wait_writable(topic)
    for group in (acks, held):
        set_group_configs(cluster.bootstrap, group, EARLIEST)
    produce(cluster.bootstrap, topic, 100)
    acker = ShareWorker(cluster.bootstrap, acks, topic)
    holder = ShareWorker(cluster.bootstrap, held, topic, hold=0)
    workers += [acker, holder]
    wait_for(lambda: len(acker.acked) == 100 and bool(holder.holding), 60, "acked and held")
    _check_share_coordinator(cluster, acks, topic)
    # DescribeShareGroupOffsets at each group's coordinator asks the partition's leader.
    assert _start_and_lag(cluster, acks, topic) == (100, 0)
    assert _start_and_lag(cluster, held, topic) == (0, 100)
    leader = cluster.brokers[cluster.owners(topic)[0]]
    leader.kill()
    acker.kill()
    holder.kill()
    cluster.wait_writable(topic, owners=set(cluster.brokers) - {leader.broker_id})
    produce(cluster.bootstrap, topic, 100, start=100)
    acker2 = ShareWorker(cluster.bootstrap, acks, topic)
    holder2 = ShareWorker(cluster.bootstrap, held, topic)
    workers += [acker2, holder2]
    wait_for(lambda: set(acker.acked) | set(acker2.acked) == set(range(200)), 90,
             "every record acknowledged")
    assert not set(acker.acked) & set(acker2.offsets()), "acknowledged records came back"
    new_leader = cluster.brokers[cluster.owners(topic)[0]]
    assert "continues from its durable state" in new_leader.log_tail(100_000)
    wait_for(lambda: set(holder2.acked) == set(range(200)), 90, "held records redelivered")
    assert {n for o, n, _ in holder2.got if o in holder.holding} == {2}
    assert {n for o, n, _ in holder2.got if o not in holder.holding} == {1}


@pytest.mark.slow
@pytest.mark.parametrize("shared_storage", ["s3", "hdfs"], indirect=True)
def test_the_share_coordinator_is_killed(
        cluster_factory: ClusterFactory, shared_storage: SharedStorage,
        workers: list[ShareWorker]) -> None:
    """kill -9 of the broker that keeps a share-partition's state (not the partition's
    leader): its state partition moves, the new owner replays it from storage, and the leader goes
    on writing there; the consumer keeps running, every record is acknowledged and none whose
    acknowledgement was answered comes back."""
    cluster = cluster_factory(brokers=3, storage=shared_storage, env=SHARE_ENV)
    topic = unique("cstate")
    create_topic(cluster.bootstrap, topic, 1)
    cluster.wait_writable(topic)
    leader = cluster.owners(topic)[0]
    topic_id = _topic_id(cluster, topic)
    group, coordinator = "", leader
    while coordinator == leader:       # a group whose state is kept by another broker
        group = unique("g")
        coordinator = _share_coordinator(cluster, f"{group}:{topic_id}:0")
    set_group_configs(cluster.bootstrap, group, EARLIEST)
    produce(cluster.bootstrap, topic, 100)
    worker = ShareWorker(cluster.bootstrap, group, topic)
    workers.append(worker)
    wait_for(lambda: len(worker.acked) == 100, 60, "100 acknowledged")
    acked_before = set(worker.acked)
    seen_before = len(worker.got)
    cluster.brokers[coordinator].kill()
    produce(cluster.bootstrap, topic, 100, start=100)
    wait_for(lambda: set(worker.acked) == set(range(200)), 90, "every record acknowledged")
    again = {offset for offset, _, _ in worker.got[seen_before:]}
    assert not acked_before & again, "acknowledged records came back"
    assert cluster.owners(topic)[0] == leader


def _share_coordinator(cluster: Any, key: str) -> int:
    """The node FindCoordinator key type 2 names for ``key`` (once the log is placed)."""
    found: list[int] = []

    def ask() -> bool:
        with RawClient(cluster.bootstrap.split(",")[0]) as client:
            answer = client.call(FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 4)
        found[:] = [answer.coordinators[0].node_id]
        return answer.coordinators[0].error_code == 0

    wait_for(ask, 30, "a share coordinator")
    return found[0]


def _check_share_coordinator(cluster: Any, group: str, topic: str) -> None:
    """FindCoordinator key type 2 names the owner of the key's state partition on every
    broker."""
    topic_id = _topic_id(cluster, topic)
    key = f"{group}:{topic_id}:0"
    owners = set()
    for broker in cluster.brokers.values():
        with RawClient(broker.bootstrap) as client:
            found = client.call(FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 4)
        assert found.coordinators[0].error_code == 0
        owners.add(found.coordinators[0].node_id)
    assert len(owners) == 1 and owners <= set(cluster.brokers)


def _start_and_lag(cluster: Any, group: str, topic: str) -> tuple[int, int]:
    with RawClient(cluster.bootstrap.split(",")[0]) as client:
        found = client.call(FindCoordinatorRequest(key=group), 3)
    with RawClient(f"{found.host}:{found.port}") as client:
        answer = client.call(DescribeShareGroupOffsetsRequest(groups=[
            DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=[
                DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[0])])]), 1)
    (described,) = answer.groups
    assert described.error_code == 0
    partition = described.topics[0].partitions[0]
    return partition.start_offset, partition.lag


def _topic_id(cluster: Any, topic: str) -> uuid.UUID:
    with RawClient(cluster.bootstrap.split(",")[0]) as client:
        answer = client.call(MetadataRequest(topics=[MetadataRequestTopic(name=topic)]), 12)
    return answer.topics[0].topic_id


def test_share_group_admin_in_a_cluster(cluster_factory: ClusterFactory) -> None:
    """AlterShareGroupOffsets, DeleteShareGroupOffsets and DeleteGroups at the group's
    coordinator rewrite the state of a share-partition another broker leads: the leader reads
    it again before it delivers more."""
    cluster = cluster_factory(brokers=3, env=SHARE_ENV)
    topic, group = unique("cadmin"), unique("g")
    create_topic(cluster.bootstrap, topic, 1)
    cluster.wait_writable(topic)
    set_group_configs(cluster.bootstrap, group, EARLIEST)
    produce(cluster.bootstrap, topic, 10)
    leader = cluster.brokers[cluster.owners(topic)[0]].bootstrap
    with RawClient(_settled_coordinator(cluster.bootstrap, group, topic)) as coordinator, \
            RawClient(leader) as data:
        def delivered(member: str) -> list[tuple[int, int, int]]:
            topic_id = heartbeat(coordinator, group, member, 0, [topic]) \
                .assignment.topic_partitions[0].topic_id
            got: list[tuple[int, int, int]] = []
            for _ in range(50):      # the first fetches may find the state log being placed
                got = acquired(fetch(data, group, member, 0, topic_id))
                if got:
                    break
                time.sleep(0.1)
            acknowledge(data, group, member, 1, topic_id, [(got[0][0], got[-1][1], ACCEPT)])
            heartbeat(coordinator, group, member, -1)
            return got

        assert delivered("a") == [(0, 9, 1)]
        altered = coordinator.call(AlterShareGroupOffsetsRequest(group_id=group, topics=[
            AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[
                AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=6)])]),
            0)
        assert altered.responses[0].partitions[0].error_code == 0
        # Described at once, before a member fetches again (Kafka describes the stored state):
        # the leader reads the rewritten state as soon as it is written.
        described = coordinator.call(DescribeShareGroupOffsetsRequest(groups=[
            DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]), 1)
        assert [(p.partition_index, p.start_offset) for t in described.groups[0].topics
                for p in t.partitions] == [(0, 6)]
        assert delivered("b") == [(6, 9, 1)]
        deleted = coordinator.call(DeleteShareGroupOffsetsRequest(group_id=group, topics=[
            DeleteShareGroupOffsetsRequestTopic(topic_name=topic)]), 0)
        assert (deleted.error_code, deleted.responses[0].error_code) == (0, 0)
        assert delivered("c") == [(0, 9, 1)]      # by share.auto.offset.reset again
        gone = coordinator.call(DeleteGroupsRequest(groups_names=[group]), 2)
        assert gone.results[0].error_code == 0
        after = coordinator.call(DescribeShareGroupOffsetsRequest(groups=[
            DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]), 1)
        assert after.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND


def _settled_coordinator(bootstrap: str, group: str, topic: str) -> str:
    """The address of the group's coordinator once it serves the group. Like a client, a
    probe member finds it again while the answer is NOT_COORDINATOR (a new cluster's
    partitions move as its brokers join) or COORDINATOR_LOAD_IN_PROGRESS, then leaves."""
    deadline = time.monotonic() + 30
    while True:
        with RawClient(bootstrap.split(",")[0]) as client:
            found = client.call(FindCoordinatorRequest(key=group), 3)
        address = f"{found.host}:{found.port}"
        if found.error_code == ErrorCode.NONE:
            with RawClient(address) as coordinator:
                error = heartbeat(coordinator, group, "probe", 0, [topic]).error_code
                if error == ErrorCode.NONE:
                    heartbeat(coordinator, group, "probe", -1)
                    return address
            assert error in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        assert time.monotonic() < deadline, f"no coordinator serves {group}: {found}"
        time.sleep(0.1)


def test_dead_letters_to_a_partition_another_broker_owns(
        cluster_factory: ClusterFactory) -> None:
    """A rejected record is written to the dead-letter topic through the owner of its
    partition when that is another broker than the source partition's leader."""
    cluster = cluster_factory(brokers=3, env=SHARE_ENV)
    topic, group = unique("cdlq"), unique("g")
    create_topic(cluster.bootstrap, topic, 1)
    cluster.wait_writable(topic)
    leader = cluster.owners(topic)[0]
    dlq = ""
    while not dlq:       # a dead-letter topic whose partition 0 another broker owns
        candidate = f"dlq.{unique('c')}"
        create_dead_letter_topic(cluster.bootstrap, candidate)
        cluster.wait_writable(candidate)
        dlq = candidate if cluster.owners(candidate)[0] != leader else ""
    set_group_configs(cluster.bootstrap, group, {
        **EARLIEST, "errors.deadletterqueue.topic.name": dlq})
    produce(cluster.bootstrap, topic, 3)
    consumer = share_consumer(cluster.bootstrap, group, topic)
    try:
        rejected: set[int] = set()
        deadline = time.monotonic() + 60
        while len(rejected) < 3 and time.monotonic() < deadline:
            for m in consumer.poll(0.3):
                consumer.acknowledge(m, AcknowledgeType.REJECT)
                rejected.add(m.offset())
            consumer.commit_sync()
    finally:
        consumer.close()
    letters = _dead_letters(cluster.bootstrap, dlq, 3)
    assert sorted(m.value() for m in letters) == [b"v0", b"v1", b"v2"]
    assert {dict(m.headers())["bmq.dlq.topic"] for m in letters} == {topic.encode()}


def test_read_committed_in_a_cluster(cluster_factory: ClusterFactory) -> None:
    """A read_committed share group on a cluster broker: the partition's leader acquires below
    its last stable offset and never delivers an aborted transaction's records."""
    cluster = cluster_factory(brokers=2, env=SHARE_ENV)
    assert share_consumer_reads_committed(cluster.bootstrap) == \
        ["plain-0", "open-0", "open-1", "plain-1"]


def test_a_share_consumer_outlives_its_group_coordinator(cluster_factory: ClusterFactory,
                                                         workers: list[ShareWorker]) -> None:
    """kill -9 of the broker coordinating the group (not the partition's leader): the new
    coordinator does not know the group (membership is in memory) and tells the member to join
    again; before, it answered GROUP_ID_NOT_FOUND, fatal to librdkafka's share consumer."""
    cluster = cluster_factory(brokers=3, env=SHARE_ENV)
    topic = unique("coord")
    create_topic(cluster.bootstrap, topic, 1)
    cluster.wait_writable(topic)
    leader = cluster.owners(topic)[0]
    group, coordinator = "", leader
    while coordinator == leader:
        group = unique("g")
        coordinator = cluster.owners(OFFSETS_TOPIC)[partition_for(group, 6)]
    set_group_configs(cluster.bootstrap, group, EARLIEST)
    produce(cluster.bootstrap, topic, 50)
    worker = ShareWorker(cluster.bootstrap, group, topic)
    workers.append(worker)
    wait_for(lambda: len(worker.acked) == 50, 60, "50 acknowledged")
    cluster.brokers[coordinator].kill()
    cluster.wait_writable(OFFSETS_TOPIC, owners=set(cluster.brokers) - {coordinator})
    produce(cluster.bootstrap, topic, 50, start=50)
    wait_for(lambda: set(worker.acked) == set(range(100)), 60, "every record acknowledged")
    assert worker.proc.poll() is None, "the share consumer died"
