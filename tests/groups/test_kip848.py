"""KIP-848 consumer groups (group.protocol=consumer) with confluent-kafka (librdkafka), and the
exact error codes of ConsumerGroupHeartbeat / ConsumerGroupDescribe / OffsetCommit through
BMQ's own codec."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DescribeGroupsRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
)
from bmq.protocol.messages.consumer_group_heartbeat_request import TopicPartitions
from bmq.protocol.messages.join_group_request import JoinGroupRequestProtocol
from bmq.protocol.messages.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)

from .helpers import create_topic, produce, subscription, unique, wait_for
from .test_clients import PARTITIONS, all_processed, assert_exactly_once
from .wire import RawClient
from .workers import workers

pytestmark = pytest.mark.timeout(180)

# Short KIP-848 timings keep the tests fast (Kafka's defaults are 45 s and 5 s).
KIP848_ENV = {
    "BMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": "200",
    "BMQ_GROUP_MIN_SESSION_TIMEOUT_MS": "500",
    "BMQ_GROUP_CONSUMER_SESSION_TIMEOUT_MS": "6000",
    "BMQ_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": "500",
}
CONSUMER = ("--protocol", "consumer")


@pytest.fixture(scope="module")
def kip848_broker(module_broker_factory: Any) -> Any:
    return module_broker_factory(env=KIP848_ENV)


def heartbeat(client: RawClient, group: str, member: str, epoch: int, **fields: Any) -> Any:
    request = ConsumerGroupHeartbeatRequest(group_id=group, member_id=member,
                                            member_epoch=epoch, **fields)
    return client.call(request, 1)


def join(client: RawClient, group: str, member: str, topics: list[str], **fields: Any) -> Any:
    fields.setdefault("rebalance_timeout_ms", 30000)
    return heartbeat(client, group, member, 0, subscribed_topic_names=topics,
                     topic_partitions=[], **fields)


def describe(client: RawClient, group: str) -> Any:
    return client.call(ConsumerGroupDescribeRequest(group_ids=[group]), 0).groups[0]


def owned(response: Any) -> list[TopicPartitions]:
    return [TopicPartitions(topic_id=tp.topic_id, partitions=list(tp.partitions))
            for tp in response.assignment.topic_partitions]


def two_settled_members(client: RawClient, group: str, topic: str) -> tuple[Any, Any]:
    """Members a then b join; a revokes what b is to get, then b gets it: both at epoch 2.
    Returns their last responses (member ids in ``member_id``)."""
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    ja = join(client, group, a, [topic])
    assert (ja.error_code, ja.member_epoch) == (ErrorCode.NONE, 1), ja
    jb = join(client, group, b, [topic])
    # b's partitions are still a's: it is at the new epoch with nothing yet.
    assert (jb.member_epoch, owned(jb)) == (2, []), jb
    revoking = heartbeat(client, group, a, 1, topic_partitions=owned(ja))
    assert revoking.member_epoch == 1                      # still revoking
    kept = sum(len(tp.partitions) for tp in revoking.assignment.topic_partitions)
    assert 0 < kept < 4
    ra = heartbeat(client, group, a, 1, topic_partitions=owned(revoking))
    assert ra.member_epoch == 2 and ra.assignment is None    # revoked: next epoch, same set
    rb = heartbeat(client, group, b, 2, topic_partitions=[])
    assert sum(len(tp.partitions) for tp in rb.assignment.topic_partitions) == 4 - kept
    ra.member_id, rb.member_id = a, b
    ra.assignment = revoking.assignment
    return ra, rb


def test_three_members_leave_and_join_exactly_once(kip848_broker: Any) -> None:
    """Three members consume with synchronous commits; one leaves and another joins while they
    work: every record is processed exactly once and the others keep consuming meanwhile."""
    bootstrap = kip848_broker.bootstrap
    topic, group = unique("kip848"), unique("kip848-group")
    per_partition = 120
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, PARTITIONS, per_partition)
    slow = ("--delay", "0.02", *CONSUMER)
    with workers() as start:
        first = [start("confluent", bootstrap, group, topic, *slow) for _ in range(3)]
        wait_for(lambda: sum(len(w.assignment()) for w in first) == PARTITIONS and
                 all(w.assignment() and len(w.processed()) >= 5 for w in first), 60,
                 "three members sharing the topic")
        assert sorted(len(w.assignment()) for w in first) == [2, 3, 3]   # uniform
        leaving, staying = first[0], first[1:]
        before = [len(w.processed()) for w in staying]
        leaving.stop()
        joiner = start("confluent", bootstrap, group, topic, *slow)
        wait_for(lambda: joiner.assignment() and len(joiner.processed()) >= 3, 60,
                 "the new member consuming")
        # The members that stayed never stopped: they went on while the group rebalanced.
        assert all(len(w.processed()) > b for w, b in zip(staying, before, strict=True))
        group_now = [*staying, joiner]
        wait_for(lambda: len(all_processed(leaving, *group_now)) >=
                 PARTITIONS * per_partition, 120, "every record processed")
        assert sum(len(w.assignment()) for w in group_now) == PARTITIONS
        for worker in group_now:
            assert not [e for _, e in worker.snapshot() if e["event"] == "commit_failed"]
        assert_exactly_once(all_processed(leaving, *group_now), per_partition)


def test_regex_subscription_picks_up_new_topic(kip848_broker: Any) -> None:
    bootstrap = kip848_broker.bootstrap
    prefix = f"rx{uuid.uuid4().hex[:8]}"
    first = f"{prefix}-a"
    create_topic(bootstrap, first, 2)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("regex"),
                         "group.protocol": "consumer", "auto.offset.reset": "earliest",
                         "topic.metadata.refresh.interval.ms": 500})
    try:
        consumer.subscribe([f"^{prefix}-.*"])
        wait_for(lambda: consumer.poll(0.1) is None and
                 {tp.topic for tp in consumer.assignment()} == {first}, 30,
                 "the matching topic assigned")
        second = f"{prefix}-b"
        create_topic(bootstrap, second, 3)
        create_topic(bootstrap, f"other-{prefix}", 1)        # does not match
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce(second, value=b"hello", partition=2)
        producer.flush(10)
        seen: list[bytes] = []

        def got_new_topic() -> bool:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error() and msg.topic() == second:
                seen.append(msg.value())
            return bool(seen)

        wait_for(got_new_topic, 30, "a record of the new matching topic")
        assert seen == [b"hello"]
        assert {tp.topic for tp in consumer.assignment()} == {first, second}
        assert len(consumer.assignment()) == 5
    finally:
        consumer.close()


def test_a_member_may_join_subscribed_to_nothing_yet(kip848_broker: Any) -> None:
    """An empty list of names is a subscription to nothing, not a missing one (Kafka accepts
    it): the Java consumer joins so when its Pattern has matched no topic yet. It gets
    partitions once it names a topic; a join with neither names nor a regex is refused."""
    bootstrap = kip848_broker.bootstrap
    topic, group = unique("empty848"), unique("empty848-group")
    create_topic(bootstrap, topic, 2)
    member = uuid.uuid4().hex
    with RawClient(bootstrap) as client:
        joined = join(client, group, member, [])
        assert joined.error_code == ErrorCode.NONE, joined
        assert owned(joined) == []
        # A full heartbeat: a valid join too, were the member still at epoch 0.
        subscribed = heartbeat(client, group, member, joined.member_epoch,
                               subscribed_topic_names=[topic], topic_partitions=[],
                               rebalance_timeout_ms=30000)
        assert subscribed.error_code == ErrorCode.NONE
        assert [sorted(tp.partitions) for tp in owned(subscribed)] == [[0, 1]]
        refused = heartbeat(client, group, uuid.uuid4().hex, 0, rebalance_timeout_ms=1000,
                            topic_partitions=[])
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.INVALID_REQUEST, "Either SubscribedTopicNames or SubscribedTopicRegex "
                                       "must be non-null when (re-)joining.")


def test_static_member_restart_keeps_its_partitions(kip848_broker: Any) -> None:
    bootstrap = kip848_broker.bootstrap
    topic, group = unique("static848"), unique("static848-group")
    create_topic(bootstrap, topic, PARTITIONS)
    with workers() as start:
        a = start("confluent", bootstrap, group, topic, *CONSUMER, "--instance", "a")
        b = start("confluent", bootstrap, group, topic, *CONSUMER, "--instance", "b")
        wait_for(lambda: len(a.assignment()) + len(b.assignment()) == PARTITIONS
                 and a.assignment() and b.assignment(), 60, "two static members")
        with RawClient(bootstrap) as client:
            epoch_before = describe(client, group).group_epoch
        mine, theirs = a.assignment(), b.assignment()
        seen = len(b.snapshot())
        a.stop()                                   # leaves with epoch -2: comes back
        a2 = start("confluent", bootstrap, group, topic, *CONSUMER, "--instance", "a")
        wait_for(lambda: a2.assignment(), 60, "the restarted static member's partitions")
        time.sleep(1.5)                            # give a rebalance the time to show
        assert a2.assignment() == mine
        assert b.assignment() == theirs
        assert not [e for _, e in b.snapshot()[seen:]
                    if e["event"] in ("revoked", "assigned") and e["partitions"]]
        with RawClient(bootstrap) as client:
            described = describe(client, group)
        # The same instance rejoined: no new group epoch, no rebalance.
        assert described.group_epoch == epoch_before
        assert sorted(m.instance_id for m in described.members) == ["a", "b"]


def test_bad_input_gets_kafkas_errors_and_changes_nothing(kip848_broker: Any) -> None:
    bootstrap = kip848_broker.bootstrap
    topic, group = unique("bad848"), unique("bad848-group")
    create_topic(bootstrap, topic, 4)
    with RawClient(bootstrap) as client:
        ra, _ = two_settled_members(client, group, topic)
        member, epoch = ra.member_id, ra.member_epoch
        before = describe(client, group)
        assert before.group_state == "Stable"

        def error(response: Any) -> ErrorCode:
            return ErrorCode(response.error_code)

        assert error(heartbeat(client, group, member, epoch + 5)) == \
            ErrorCode.FENCED_MEMBER_EPOCH
        assert error(heartbeat(client, group, member, epoch - 1)) == \
            ErrorCode.FENCED_MEMBER_EPOCH
        assert error(heartbeat(client, group, "nobody", epoch)) == ErrorCode.UNKNOWN_MEMBER_ID
        assert error(heartbeat(client, unique("nogroup"), member, 3)) == \
            ErrorCode.GROUP_ID_NOT_FOUND
        assert error(heartbeat(client, group, member, -7)) == ErrorCode.INVALID_REQUEST
        assert error(heartbeat(client, group, uuid.uuid4().hex, 0, rebalance_timeout_ms=1000,
                               topic_partitions=[])) == ErrorCode.INVALID_REQUEST
        assert error(join(client, group, uuid.uuid4().hex, [topic],
                          server_assignor="sticky")) == ErrorCode.UNSUPPORTED_ASSIGNOR
        assert error(heartbeat(client, group, uuid.uuid4().hex, 0, rebalance_timeout_ms=1000,
                               topic_partitions=[], subscribed_topic_regex="(unclosed")) == \
            ErrorCode.INVALID_REGULAR_EXPRESSION
        # A commit with a stale member epoch, or from a stranger, is refused.
        commit = OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=epoch - 1, member_id=member,
            topics=[OffsetCommitRequestTopic(name=topic, partitions=[
                OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])])
        assert client.call(commit, 9).topics[0].partitions[0].error_code == \
            ErrorCode.STALE_MEMBER_EPOCH
        commit.member_id = "nobody"
        assert client.call(commit, 9).topics[0].partitions[0].error_code == \
            ErrorCode.UNKNOWN_MEMBER_ID
        unknown = describe(client, unique("nogroup"))
        assert unknown.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        after = describe(client, group)
        assert (after.group_epoch, after.assignment_epoch, after.group_state) == \
            (before.group_epoch, before.assignment_epoch, before.group_state)
        assert [(m.member_id, m.member_epoch, m.assignment) for m in after.members] == \
            [(m.member_id, m.member_epoch, m.assignment) for m in before.members]
        # The current epoch still works, and commits with it.
        ok = heartbeat(client, group, member, epoch)
        assert (ok.error_code, ok.member_epoch) == (ErrorCode.NONE, epoch)
        commit.member_id, commit.generation_id_or_member_epoch = member, epoch
        assert client.call(commit, 9).topics[0].partitions[0].error_code == ErrorCode.NONE


def test_groups_convert_between_protocols_only_when_empty(kip848_broker: Any) -> None:
    bootstrap = kip848_broker.bootstrap
    topic, group = unique("conv848"), unique("conv848-group")
    create_topic(bootstrap, topic, 2)
    member = uuid.uuid4().hex
    classic_join = JoinGroupRequest(
        group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=subscription(topic))])
    with RawClient(bootstrap) as client:
        joined = join(client, group, member, [topic])
        assert joined.error_code == ErrorCode.NONE
        listed = client.call(ListGroupsRequest(types_filter=["consumer"]), 5).groups
        mine = [g for g in listed if g.group_id == group]
        assert [(g.group_type, g.protocol_type) for g in mine] == [("consumer", "consumer")]
        assert not [g for g in client.call(ListGroupsRequest(types_filter=["classic"]), 5)
                    .groups if g.group_id == group]
        described = client.call(DescribeGroupsRequest(groups=[group]), 5).groups[0]
        assert (described.protocol_type, described.protocol_data) == ("consumer", "uniform")
        assert [m.member_id for m in described.members] == [member]
        # A classic member cannot join a consumer group that has members...
        assert client.call(classic_join, 5).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        left = heartbeat(client, group, member, -1)
        assert (left.error_code, left.member_epoch) == (ErrorCode.NONE, -1)
        assert describe(client, group).group_state == "Empty"
        # ...but takes over an empty one, which is then classic.
        classic_join.member_id = client.call(classic_join, 5).member_id  # MEMBER_ID_REQUIRED
        assert client.call(classic_join, 5).error_code == ErrorCode.NONE
        assert describe(client, group).error_code == ErrorCode.GROUP_ID_NOT_FOUND
        # A non-empty classic group is not a consumer group.
        refused = join(client, group, uuid.uuid4().hex, [topic])
        assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_group_survives_a_broker_restart(broker_factory: Any) -> None:
    """Epochs and assignments are durable: members carry on with the epoch they had."""
    broker = broker_factory(env=KIP848_ENV)
    topic, group = unique("restart848"), unique("restart848-group")
    create_topic(broker.bootstrap, topic, 4)
    with RawClient(broker.bootstrap) as client:
        ra, rb = two_settled_members(client, group, topic)
        a, b = ra.member_id, rb.member_id
        before = describe(client, group)
    assert before.group_state == "Stable", before
    broker.restart()
    with RawClient(broker.bootstrap) as client:
        after = describe(client, group)
        assert (after.group_epoch, after.assignment_epoch) == \
            (before.group_epoch, before.assignment_epoch)
        assert sorted((m.member_id, m.member_epoch, str(m.assignment)) for m in after.members) \
            == sorted((m.member_id, m.member_epoch, str(m.assignment)) for m in before.members)
        for member, last in ((a, ra), (b, rb)):
            again = heartbeat(client, group, member, last.member_epoch)
            assert (again.error_code, again.member_epoch) == (ErrorCode.NONE, last.member_epoch)
        # Fencing still holds after the restart.
        assert heartbeat(client, group, a, ra.member_epoch + 1).error_code == \
            ErrorCode.FENCED_MEMBER_EPOCH


def test_admin_client_describes_and_lists_consumer_groups(kip848_broker: Any) -> None:
    bootstrap = kip848_broker.bootstrap
    topic, group = unique("admin848"), unique("admin848-group")
    create_topic(bootstrap, topic, 3)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "group.protocol": "consumer", "group.remote.assignor": "range"})
    try:
        consumer.subscribe([topic])
        wait_for(lambda: consumer.poll(0.1) is None and len(consumer.assignment()) == 3, 30,
                 "the assignment")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        description = admin.describe_consumer_groups([group])[group].result(10)
        assert description.type.name == "CONSUMER"
        assert description.partition_assignor == "range"
        assert len(description.members) == 1
        assert sorted(tp.partition for tp in
                      description.members[0].assignment.topic_partitions) == [0, 1, 2]
        listed = admin.list_consumer_groups().result(10).valid
        assert [g.type.name for g in listed if g.group_id == group] == ["CONSUMER"]
    finally:
        consumer.close()
