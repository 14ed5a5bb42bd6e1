"""Share group APIs over the wire with exact requests (BMQ's codec): Kafka's error codes for
bad input, and that a refused request changes nothing."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

from bmq.metadata.topics import SHARE_STATE_TOPIC
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ListGroupsRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
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
from bmq.protocol.messages.share_acknowledge_request import (
    AcknowledgePartition,
    AcknowledgeTopic,
)
from bmq.protocol.messages.share_fetch_request import (
    AcknowledgementBatch,
    FetchPartition,
    FetchTopic,
)
from tests.groups.wire import RawClient
from tests.share.helpers import SHARE_ENV, create_topic, produce, set_group_configs, unique

ACCEPT, RELEASE = 1, 2


def heartbeat(client: RawClient, group: str, member: str, epoch: int,
              topics: list[str] | None = None) -> Any:
    return client.call(ShareGroupHeartbeatRequest(group_id=group, member_id=member,
                                                  member_epoch=epoch,
                                                  subscribed_topic_names=topics), 1)


def fetch(client: RawClient, group: str, member: str, epoch: int, topic_id: uuid.UUID,
          acks: Sequence[tuple[int, int, int]] = (), wait_ms: int = 0,
          max_records: int = 100) -> Any:
    batches = [AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=[t])
               for f, last, t in acks]
    return client.call(ShareFetchRequest(
        group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=wait_ms,
        min_bytes=1, max_records=max_records, batch_size=max_records, topics=[FetchTopic(
            topic_id=topic_id, partitions=[FetchPartition(
                partition_index=0, acknowledgement_batches=batches)])]), 1)


def acknowledge(client: RawClient, group: str, member: str, epoch: int, topic_id: uuid.UUID,
                acks: list[tuple[int, int, int]]) -> Any:
    return client.call(ShareAcknowledgeRequest(
        group_id=group, member_id=member, share_session_epoch=epoch, topics=[AcknowledgeTopic(
            topic_id=topic_id, partitions=[AcknowledgePartition(
                partition_index=0, acknowledgement_batches=[
                    AcknowledgementBatch(first_offset=f, last_offset=last,
                                         acknowledge_types=[t])
                    for f, last, t in acks])])]), 1)


def acquired(answer: Any) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in answer.responses for p in t.partitions for a in p.acquired_records]


def partition_of(answer: Any) -> Any:
    (topic,) = answer.responses
    (partition,) = topic.partitions
    return partition


def test_membership_epochs_and_errors(share_broker: Any) -> None:
    topic, group = unique("hb"), unique("g")
    create_topic(share_broker.bootstrap, topic, 2)
    with RawClient(share_broker.bootstrap) as client:
        # Not Kafka's GROUP_ID_NOT_FOUND: membership is in memory, so an unknown group may be
        # one whose coordinator moved, and its members must join again (not die).
        assert heartbeat(client, group, "m1", 3).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert heartbeat(client, group, "m1", 0).error_code == ErrorCode.INVALID_REQUEST
        joined = heartbeat(client, group, "m1", 0, [topic])
        assert joined.error_code == ErrorCode.NONE and joined.member_epoch >= 1
        assert joined.heartbeat_interval_ms == 5000
        (assigned,) = joined.assignment.topic_partitions
        assert sorted(assigned.partitions) == [0, 1]
        epoch = joined.member_epoch
        # Nothing changed: the same epoch and no assignment.
        again = heartbeat(client, group, "m1", epoch)
        assert (again.error_code, again.member_epoch, again.assignment) == \
            (ErrorCode.NONE, epoch, None)
        assert heartbeat(client, group, "m1", epoch + 5).error_code == \
            ErrorCode.FENCED_MEMBER_EPOCH
        assert heartbeat(client, group, "m2", epoch).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        second = heartbeat(client, group, "m2", 0, [topic])
        assert second.assignment.topic_partitions[0].partitions == [0, 1]   # every member
        described = client.call(ShareGroupDescribeRequest(group_ids=[group, "nope"]), 1)
        mine, unknown = described.groups
        assert (mine.error_code, mine.group_state, len(mine.members)) == \
            (ErrorCode.NONE, "Stable", 2)
        assert mine.members[0].assignment.topic_partitions[0].topic_name == topic
        assert unknown.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        listed = client.call(ListGroupsRequest(types_filter=["Share"]), 5)
        assert (group, "share", "Stable") in {(g.group_id, g.group_type, g.group_state)
                                               for g in listed.groups}
        classic = client.call(ListGroupsRequest(types_filter=["classic"]), 5)
        assert group not in {g.group_id for g in classic.groups}
        assert heartbeat(client, group, "m1", -1).member_epoch == -1
        assert heartbeat(client, group, "m1", epoch).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_bad_acknowledgements_and_sessions_change_nothing(share_broker: Any) -> None:
    topic, group = unique("acks"), unique("g")
    create_topic(share_broker.bootstrap, topic, 1)
    set_group_configs(share_broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(share_broker.bootstrap, topic, 10)
    with RawClient(share_broker.bootstrap) as a, RawClient(share_broker.bootstrap) as b:
        topic_id = heartbeat(a, group, "a", 0, [topic]).assignment.topic_partitions[0].topic_id
        heartbeat(b, group, "b", 0, [topic])
        first = fetch(a, group, "a", 0, topic_id)
        assert first.error_code == ErrorCode.NONE and first.acquisition_lock_timeout_ms == 30000
        assert acquired(first) == [(0, 9, 1)]
        assert partition_of(first).records              # the batches holding them
        # Sessions: Kafka's errors, and the failed request does not move the epoch.
        assert fetch(b, group, "b", 4, topic_id).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        assert fetch(a, group, "a", 5, topic_id).error_code == \
            ErrorCode.INVALID_SHARE_SESSION_EPOCH
        assert acknowledge(a, group, "a", 0, topic_id, [(0, 0, ACCEPT)]).error_code == \
            ErrorCode.INVALID_SHARE_SESSION_EPOCH
        # b may not acknowledge a's records; a may not acknowledge records it does not hold;
        # a request with one bad batch applies none of them.
        assert fetch(b, group, "b", 0, topic_id).error_code == ErrorCode.NONE
        refused = fetch(b, group, "b", 1, topic_id, [(0, 4, ACCEPT)])
        assert partition_of(refused).acknowledge_error_code == ErrorCode.INVALID_RECORD_STATE
        assert partition_of(refused).records is not None    # librdkafka rejects null records
        mixed = acknowledge(a, group, "a", 1, topic_id, [(0, 4, ACCEPT), (8, 12, ACCEPT)])
        assert partition_of(mixed).error_code == ErrorCode.INVALID_RECORD_STATE
        bad_type = acknowledge(a, group, "a", 2, topic_id, [(0, 0, 7)])
        assert partition_of(bad_type).error_code == ErrorCode.INVALID_REQUEST
        # Still a's, all ten: its acknowledgements now work, once.
        done = acknowledge(a, group, "a", 3, topic_id, [(0, 8, ACCEPT), (9, 9, RELEASE)])
        assert partition_of(done).error_code == ErrorCode.NONE
        twice = acknowledge(a, group, "a", 4, topic_id, [(0, 0, ACCEPT)])
        assert partition_of(twice).error_code == ErrorCode.INVALID_RECORD_STATE
        unknown = fetch(a, group, "a", 5, uuid.uuid4())
        assert {p.error_code for t in unknown.responses for p in t.partitions} == \
            {ErrorCode.UNKNOWN_TOPIC_ID}


def test_state_log_snapshots_and_a_crash_keep_acknowledgements_and_back_offs(
        broker_factory: Any) -> None:
    """Hundreds of small writes make the share state log snapshot itself and drop what is
    before (tiny segments); after a kill -9 the replay from the snapshots still knows what was
    acknowledged and which released records wait for their back-off."""
    broker = broker_factory(env={**SHARE_ENV,
                                 "BMQ_SHARE_COORDINATOR_STATE_TOPIC_SEGMENT_BYTES": "4096"})
    topic, group = unique("compact"), unique("g")
    create_topic(broker.bootstrap, topic, 1)
    set_group_configs(broker.bootstrap, group, {"share.auto.offset.reset": "earliest",
                                                "bmq.share.retry.backoff.ms": "600000"})
    produce(broker.bootstrap, topic, 150, gap_s=0.001)     # one record per batch
    with RawClient(broker.bootstrap) as client:
        topic_id = heartbeat(client, group, "a", 0, [topic]).assignment.topic_partitions[0] \
            .topic_id
        epoch = 0
        for offset in range(150):
            answer = fetch(client, group, "a", epoch, topic_id,
                           [(offset - 1, offset - 1, RELEASE if offset % 10 == 1 else ACCEPT)]
                           if offset else [], max_records=1)
            epoch += 1
            assert acquired(answer) == [(offset, offset, 1)], offset
        last = acknowledge(client, group, "a", epoch, topic_id, [(149, 149, ACCEPT)])
        assert partition_of(last).error_code == ErrorCode.NONE
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("w")})
    starts = [consumer.get_watermark_offsets(TopicPartition(SHARE_STATE_TOPIC, p), 10)[0]
              for p in range(3)]
    consumer.close()
    assert max(starts) > 0, "the share state log never dropped what a snapshot replaced"
    broker.kill()
    broker.start()
    produce(broker.bootstrap, topic, 1, start=150)
    with RawClient(broker.bootstrap) as client:
        heartbeat(client, group, "b", 0, [topic])
        # Only the new record: the accepted ones are done, the released ones (1, 11, ...) wait
        # for their 10-minute back-off.
        assert acquired(fetch(client, group, "b", 0, topic_id, wait_ms=500)) == [(150, 150, 1)]


def test_broker_settings_are_the_share_group_configs_defaults(broker_factory: Any) -> None:
    """group.share.record.lock.duration.ms and group.share.delivery.count.limit (Kafka's
    broker settings) are the defaults a group's own configs override."""
    broker = broker_factory(env={**SHARE_ENV, "BMQ_GROUP_SHARE_RECORD_LOCK_DURATION_MS": "7000",
                                 "BMQ_GROUP_SHARE_DELIVERY_COUNT_LIMIT": "2"})
    topic, group, other = unique("defaults"), unique("g"), unique("g")
    create_topic(broker.bootstrap, topic, 1)
    set_group_configs(broker.bootstrap, group, {"share.auto.offset.reset": "earliest",
                                                "bmq.share.retry.backoff.ms": "0"})
    set_group_configs(broker.bootstrap, other, {"share.record.lock.duration.ms": "9000"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = {
        name: future.result(15) for name, future in admin.describe_configs(
            [ConfigResource(ConfigResource.Type.GROUP, g) for g in (group, other)]).items()}
    values = {resource.name: {k: (e.value, e.source) for k, e in configs.items()}
              for resource, configs in described.items()}
    assert values[group]["share.delivery.count.limit"] == ("2", ConfigSource.DEFAULT_CONFIG.value)
    assert values[group]["share.record.lock.duration.ms"][0] == "7000"
    assert values[other]["share.record.lock.duration.ms"] == (
        "9000", ConfigSource.GROUP_CONFIG.value)
    produce(broker.bootstrap, topic, 1)
    with RawClient(broker.bootstrap) as client:
        topic_id = heartbeat(client, group, "a", 0, [topic]).assignment.topic_partitions[0] \
            .topic_id
        first = fetch(client, group, "a", 0, topic_id)
        assert first.acquisition_lock_timeout_ms == 7000 and acquired(first) == [(0, 0, 1)]
        second = fetch(client, group, "a", 1, topic_id, [(0, 0, RELEASE)])
        assert acquired(second) == [(0, 0, 2)]
        # The second failed delivery reaches the broker's limit of 2: given up.
        done = fetch(client, group, "a", 2, topic_id, [(0, 0, RELEASE)], wait_ms=300)
        assert partition_of(done).acknowledge_error_code == ErrorCode.NONE
        assert acquired(done) == []


def test_share_group_offsets_described_altered_and_deleted(share_broker: Any) -> None:
    topic, group = unique("offsets"), unique("g")
    create_topic(share_broker.bootstrap, topic, 1)
    set_group_configs(share_broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(share_broker.bootstrap, topic, 10)
    with RawClient(share_broker.bootstrap) as client:
        unknown = client.call(DescribeShareGroupOffsetsRequest(groups=[
            DescribeShareGroupOffsetsRequestGroup(group_id=unique("none"), topics=None)]), 1)
        assert unknown.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
        topic_id = heartbeat(client, group, "a", 0, [topic]).assignment.topic_partitions[0] \
            .topic_id
        fetch(client, group, "a", 0, topic_id)
        acknowledge(client, group, "a", 1, topic_id, [(0, 3, ACCEPT), (5, 5, ACCEPT)])

        def offsets(version: int, every_topic: bool = False) -> Any:
            topics = None if every_topic else [DescribeShareGroupOffsetsRequestTopic(
                topic_name=topic, partitions=[0])]
            answer = client.call(DescribeShareGroupOffsetsRequest(groups=[
                DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=topics)]), version)
            (described,) = answer.groups
            assert described.error_code == ErrorCode.NONE
            (t,) = described.topics
            assert (t.topic_name, t.topic_id) == (topic, topic_id)
            return t.partitions[0]

        assert offsets(1, every_topic=True) == offsets(1)
        now = offsets(1)
        assert (now.partition_index, now.start_offset, now.lag) == (0, 4, 5)   # 4, 6-9 left
        assert offsets(0).lag == -1                                           # v0 has none
        alter = AlterShareGroupOffsetsRequest(group_id=group, topics=[
            AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[
                AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=8)])])
        assert client.call(alter, 0).error_code == ErrorCode.NON_EMPTY_GROUP  # "a" is a member
        delete = DeleteShareGroupOffsetsRequest(group_id=group, topics=[
            DeleteShareGroupOffsetsRequestTopic(topic_name=topic)])
        assert client.call(delete, 0).error_code == ErrorCode.NON_EMPTY_GROUP
        assert offsets(1).start_offset == 4                                  # unchanged
        heartbeat(client, group, "a", -1)
        altered = client.call(alter, 0)
        assert altered.error_code == ErrorCode.NONE
        assert altered.responses[0].partitions[0].error_code == ErrorCode.NONE
        assert offsets(1).start_offset == 8
        heartbeat(client, group, "b", 0, [topic])
        assert acquired(fetch(client, group, "b", 0, topic_id)) == [(8, 9, 1)]
        heartbeat(client, group, "b", -1)
        deleted = client.call(delete, 0)
        assert (deleted.error_code, deleted.responses[0].error_code) == \
            (ErrorCode.NONE, ErrorCode.NONE)
        assert offsets(1).start_offset == -1
    # The deletion holds across a restart (a tombstone in the state log); the group starts
    # over, from the earliest record.
    share_broker.restart()
    with RawClient(share_broker.bootstrap) as client:
        heartbeat(client, group, "c", 0, [topic])
        assert acquired(fetch(client, group, "c", 0, topic_id)) == [(0, 9, 1)]


def test_acknowledgements_after_leaving_the_group_hold(share_broker: Any) -> None:
    """What librdkafka's close() sends: the leave heartbeat, then the last acknowledgements
    with epoch -1. The member's locks belong to its share session, so they still count."""
    topic, group = unique("leave"), unique("g")
    create_topic(share_broker.bootstrap, topic, 1)
    set_group_configs(share_broker.bootstrap, group, {"share.auto.offset.reset": "earliest",
                                                      "bmq.share.retry.backoff.ms": "0"})
    produce(share_broker.bootstrap, topic, 5)
    with RawClient(share_broker.bootstrap) as client:
        topic_id = heartbeat(client, group, "a", 0, [topic]).assignment.topic_partitions[0] \
            .topic_id
        assert acquired(fetch(client, group, "a", 0, topic_id)) == [(0, 4, 1)]
        assert heartbeat(client, group, "a", -1).error_code == ErrorCode.NONE
        last = acknowledge(client, group, "a", -1, topic_id, [(0, 4, ACCEPT)])
        assert partition_of(last).error_code == ErrorCode.NONE
        # The session is closed: nothing more under it.
        assert fetch(client, group, "a", 1, topic_id).error_code == \
            ErrorCode.SHARE_SESSION_NOT_FOUND
        heartbeat(client, group, "b", 0, [topic])
        assert acquired(fetch(client, group, "b", 0, topic_id, wait_ms=300)) == []


@pytest.mark.parametrize("name", ["__consumer_offsets", SHARE_STATE_TOPIC, "no spaces!", "."])
def test_a_dead_letter_topic_must_be_a_legal_user_topic(share_broker: Any, name: str) -> None:
    with pytest.raises(KafkaException) as refused:
        set_group_configs(share_broker.bootstrap, unique("g"),
                          {"errors.deadletterqueue.topic.name": name})
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_delete_groups_deletes_an_empty_share_group(share_broker: Any) -> None:
    """DeleteGroups (the admin client's delete_consumer_groups) of a share group: refused
    with NON_EMPTY_GROUP while it has a member; once empty, its share-partitions are forgotten
    and the group is gone, so it starts over by share.auto.offset.reset."""
    topic, group = unique("delgroup"), unique("g")
    create_topic(share_broker.bootstrap, topic, 1)
    set_group_configs(share_broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(share_broker.bootstrap, topic, 5)
    admin = AdminClient({"bootstrap.servers": share_broker.bootstrap})

    def delete() -> int:
        try:
            admin.delete_consumer_groups([group], request_timeout=10)[group].result(15)
        except KafkaException as error:
            return int(error.args[0].code())
        return 0

    with RawClient(share_broker.bootstrap) as client:
        topic_id = heartbeat(client, group, "a", 0, [topic]).assignment.topic_partitions[0] \
            .topic_id
        assert acquired(fetch(client, group, "a", 0, topic_id)) == [(0, 4, 1)]
        acknowledge(client, group, "a", 1, topic_id, [(0, 4, ACCEPT)])
        assert delete() == ErrorCode.NON_EMPTY_GROUP
        heartbeat(client, group, "a", -1)
        assert delete() == 0
        gone = client.call(DescribeShareGroupOffsetsRequest(groups=[
            DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]), 1)
        assert gone.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert delete() == ErrorCode.GROUP_ID_NOT_FOUND
        heartbeat(client, group, "b", 0, [topic])
        assert acquired(fetch(client, group, "b", 0, topic_id)) == [(0, 4, 1)]
