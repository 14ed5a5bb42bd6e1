"""Group APIs over the wire with exact requests (BMQ's codec), every version of every API.

These pin down the error codes and edge cases real clients rely on but rarely show: fencing of
stale members and generations, protocol selection, static membership, the admin APIs.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    DeleteGroupsRequest,
    DeleteTopicsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    ProduceRequest,
    SyncGroupRequest,
)
from bmq.protocol.messages.join_group_request import JoinGroupRequestProtocol
from bmq.protocol.messages.leave_group_request import MemberIdentity
from bmq.protocol.messages.metadata_request import MetadataRequestTopic
from bmq.protocol.messages.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from bmq.protocol.messages.offset_delete_request import (
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from bmq.protocol.messages.offset_fetch_request import (
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from bmq.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from bmq.protocol.messages.sync_group_request import SyncGroupRequestAssignment
from bmq.protocol.primitives import ZERO_UUID
from tests.storage.batches import make_batch

from .helpers import assignment, create_topic, subscription, unique
from .wire import RawClient

pytestmark = pytest.mark.timeout(120)

SESSION_MS = 10_000


def clamp(cls: Any, version: int) -> int:
    return max(cls.MIN_VERSION, min(cls.MAX_VERSION, version))


def join_request(group: str, member_id: str = "", topic: str = "t",
                 protocols: list[tuple[str, bytes]] | None = None, instance: str | None = None,
                 session_ms: int = SESSION_MS, rebalance_ms: int = SESSION_MS,
                 protocol_type: str = "consumer") -> JoinGroupRequest:
    if protocols is None:
        protocols = [("range", subscription(topic))]
    return JoinGroupRequest(
        group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
        member_id=member_id, group_instance_id=instance, protocol_type=protocol_type,
        protocols=[JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols])


def join(client: RawClient, version: int, group: str, **kwargs: Any) -> Any:
    """JoinGroup, including the MEMBER_ID_REQUIRED round trip of v4+ for new members."""
    response = client.call(join_request(group, **kwargs), version)
    if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        assert version >= 4 and kwargs.get("instance") is None
        assert response.member_id
        kwargs["member_id"] = response.member_id
        response = client.call(join_request(group, **kwargs), version)
    return response


def sync(client: RawClient, version: int, group: str, generation: int, member_id: str,
         assignments: dict[str, bytes] | None = None, instance: str | None = None,
         protocol_name: str | None = None) -> Any:
    return client.call(SyncGroupRequest(
        group_id=group, generation_id=generation, member_id=member_id,
        group_instance_id=instance, protocol_type="consumer" if version >= 5 else None,
        protocol_name=protocol_name,
        assignments=[SyncGroupRequestAssignment(member_id=m, assignment=a)
                     for m, a in (assignments or {}).items()]), version)


def commit(client: RawClient, version: int, group: str, generation: int, member_id: str,
           topic: str, offsets: dict[int, int], metadata: str | None = "",
           topic_id: Any = None, instance: str | None = None) -> dict[int, int]:
    response = client.call(OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        group_instance_id=instance,
        topics=[OffsetCommitRequestTopic(
            name=topic, topic_id=ZERO_UUID if topic_id is None else topic_id,
            partitions=[OffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                                     committed_metadata=metadata)
                        for p, o in offsets.items()])]), version)
    (result,) = response.topics
    return {p.partition_index: p.error_code for p in result.partitions}


def fetch(client: RawClient, version: int, group: str, topic: str | None,
          partitions: list[int] | None = None,
          topic_id: Any = None) -> dict[tuple[str, int], tuple[int, str | None, int]]:
    """Committed (offset, metadata, error) by (topic, partition); topic None: all."""
    if version >= 8:
        topics = None if topic is None else [OffsetFetchRequestTopics(
            name=topic, topic_id=topic_id if version >= 10 else ZERO_UUID,
            partition_indexes=partitions or [])]
        response = client.call(OffsetFetchRequest(groups=[
            OffsetFetchRequestGroup(group_id=group, topics=topics)]), version)
        (g,) = response.groups
        assert g.error_code == 0
        out = {}
        for t in g.topics:
            name = t.name if version < 10 else topic or str(t.topic_id)
            for p in t.partitions:
                out[(name, p.partition_index)] = (p.committed_offset, p.metadata, p.error_code)
        return out
    topics_v = None if topic is None else [
        OffsetFetchRequestTopic(name=topic, partition_indexes=partitions or [])]
    response = client.call(OffsetFetchRequest(group_id=group, topics=topics_v), version)
    if version >= 2:
        assert response.error_code == 0
    return {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
            for t in response.topics for p in t.partitions}


def topic_id(client: RawClient, topic: str) -> Any:
    response = client.call(MetadataRequest(topics=[MetadataRequestTopic(name=topic)]), 12)
    (t,) = response.topics
    return t.topic_id


def describe(client: RawClient, group: str, version: int = 5) -> Any:
    (described,) = client.call(DescribeGroupsRequest(groups=[group]), version).groups
    return described


def heartbeat(client: RawClient, group: str, generation: int, member_id: str,
              version: int = 4, instance: str | None = None) -> int:
    return int(client.call(HeartbeatRequest(group_id=group, generation_id=generation,
                                            member_id=member_id, group_instance_id=instance),
                           version).error_code)


@pytest.fixture(scope="module")
def topic(group_broker: Any) -> str:
    name = unique("wire")
    create_topic(group_broker.bootstrap, name, 4)
    return name


# ------------------------------------------------------------------------------ every version

def test_every_version_of_every_group_api(group_broker: Any, topic: str) -> None:
    """One member through join, sync, heartbeat, commit, fetch, describe, leave, at each
    version of each API (0..10 clamped to the API's range), then list and delete."""
    with RawClient(group_broker.bootstrap) as client:
        tid = topic_id(client, topic)
        groups = []
        for i in range(11):
            group = unique(f"every-v{i}")
            groups.append(group)
            fc = clamp(FindCoordinatorRequest, i)
            request = (FindCoordinatorRequest(coordinator_keys=[group]) if fc >= 4
                       else FindCoordinatorRequest(key=group))
            found = client.call(request, fc)
            node = found.coordinators[0] if fc >= 4 else found
            assert (node.error_code, node.node_id, node.port) == (0, 0, group_broker.port)

            jv = clamp(JoinGroupRequest, i)
            joined = join(client, jv, group, topic=topic)
            assert joined.error_code == 0, (jv, joined)
            assert joined.generation_id == 1
            assert joined.leader == joined.member_id
            assert [m.member_id for m in joined.members] == [joined.member_id]
            assert joined.members[0].metadata == subscription(topic)
            assert joined.protocol_name == "range"
            if jv >= 7:
                assert joined.protocol_type == "consumer"
            member = joined.member_id

            sv = clamp(SyncGroupRequest, i)
            mine = assignment(topic, [0, 1, 2, 3])
            synced = sync(client, sv, group, 1, member, {member: mine},
                          protocol_name="range" if sv >= 5 else None)
            assert (synced.error_code, synced.assignment) == (0, mine)
            if sv >= 5:
                assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
            assert heartbeat(client, group, 1, member, clamp(HeartbeatRequest, i)) == 0

            cv = clamp(OffsetCommitRequest, i)
            committed = commit(client, cv, group, 1, member, topic, {0: 10 + i, 3: 30 + i},
                               metadata=f"meta-{i}", topic_id=tid)
            assert committed == {0: 0, 3: 0}, cv
            fv = clamp(OffsetFetchRequest, i)
            got = fetch(client, fv, group, topic, [0, 1, 3], topic_id=tid)
            assert got == {(topic, 0): (10 + i, f"meta-{i}", 0), (topic, 1): (-1, "", 0),
                           (topic, 3): (30 + i, f"meta-{i}", 0)}, fv
            if fv >= 2:
                everything = fetch(client, fv, group, None)
                assert sorted(o for o, _, _ in everything.values()) == [10 + i, 30 + i]

            dv = clamp(DescribeGroupsRequest, i)
            described = describe(client, group, dv)
            assert (described.error_code, described.group_state, described.protocol_type,
                    described.protocol_data) == (0, "Stable", "consumer", "range")
            (m,) = described.members
            assert (m.member_id, m.client_id, m.member_assignment) == (member, "raw-test", mine)
            assert m.member_metadata == subscription(topic)

            lv = clamp(LeaveGroupRequest, i)
            if lv >= 3:
                left = client.call(LeaveGroupRequest(group_id=group, members=[
                    MemberIdentity(member_id=member)]), lv)
                assert left.error_code == 0
                assert [(r.member_id, r.error_code) for r in left.members] == [(member, 0)]
            else:
                left = client.call(LeaveGroupRequest(group_id=group, member_id=member), lv)
                assert left.error_code == 0
            assert describe(client, group, dv).group_state == "Empty"

        for lg in range(ListGroupsRequest.MIN_VERSION, ListGroupsRequest.MAX_VERSION + 1):
            listed = client.call(ListGroupsRequest(), lg)
            assert listed.error_code == 0
            mine_listed = {g.group_id: g for g in listed.groups if g.group_id in groups}
            assert set(mine_listed) == set(groups)
            for g in mine_listed.values():
                assert g.protocol_type == "consumer"
                if lg >= 4:
                    assert g.group_state == "Empty"
                if lg >= 5:
                    assert g.group_type == "classic"

        for dg in range(DeleteGroupsRequest.MIN_VERSION, DeleteGroupsRequest.MAX_VERSION + 1):
            victims = groups[dg * 3 : dg * 3 + 3]
            deleted = client.call(DeleteGroupsRequest(groups_names=victims), dg)
            assert {r.group_id: r.error_code for r in deleted.results} == dict.fromkeys(
                victims, 0)
        remaining = groups[9:]
        for group in groups[:9]:
            assert fetch(client, 8, group, None) == {}
        for group in remaining:
            assert len(fetch(client, 8, group, None)) == 2


def test_find_coordinator_batches_and_key_types(group_broker: Any) -> None:
    with RawClient(group_broker.bootstrap) as client:
        for version in (4, 5, 6):
            found = client.call(FindCoordinatorRequest(key_type=0,
                                                       coordinator_keys=["a", "b", ""]), version)
            assert [(c.key, c.error_code, c.node_id) for c in found.coordinators] == [
                ("a", 0, 0), ("b", 0, 0), ("", 0, 0)]
            # bmq serve coordinates transactional ids and share-partition keys too.
            txn = client.call(FindCoordinatorRequest(key_type=1, coordinator_keys=["tx"]),
                              version)
            assert [(c.key, c.error_code, c.node_id) for c in txn.coordinators] == [
                ("tx", 0, 0)]
            share_key = f"sh:{uuid.uuid4()}:0"
            share = client.call(FindCoordinatorRequest(
                key_type=2, coordinator_keys=[share_key, "sh"]), version)
            assert [(c.key, c.error_code, c.node_id) for c in share.coordinators] == [
                (share_key, 0, 0), ("sh", ErrorCode.INVALID_REQUEST, -1)]
        for version in (1, 2, 3):
            txn = client.call(FindCoordinatorRequest(key="tx", key_type=1), version)
            assert (txn.error_code, txn.node_id) == (0, 0)
            bad = client.call(FindCoordinatorRequest(key="x", key_type=7), version)
            assert bad.error_code == ErrorCode.INVALID_REQUEST


# ------------------------------------------------------------------------------ fencing

def test_stale_members_and_generations_change_nothing(group_broker: Any, topic: str) -> None:
    group = unique("fencing")
    with RawClient(group_broker.bootstrap) as a, RawClient(group_broker.bootstrap) as b:
        joined = join(a, 9, group, topic=topic)
        member, gen = joined.member_id, joined.generation_id
        assert sync(a, 5, group, gen, member, {member: assignment(topic, [0, 1, 2, 3])}
                    ).error_code == 0
        assert commit(a, 9, group, gen, member, topic, {0: 5}, "good") == {0: 0}

        def unchanged() -> None:
            assert fetch(a, 9, group, topic, [0]) == {(topic, 0): (5, "good", 0)}

        for version in (2, 7, 8, 9):
            assert commit(a, version, group, gen, "nobody", topic, {0: 99}) == {
                0: ErrorCode.UNKNOWN_MEMBER_ID}
            assert commit(a, version, group, gen + 1, member, topic, {0: 99}) == {
                0: ErrorCode.ILLEGAL_GENERATION}
            # Without member id and generation only an empty group may be committed to.
            assert commit(a, version, group, -1, "", topic, {0: 99}) == {
                0: ErrorCode.UNKNOWN_MEMBER_ID}
            unchanged()
        # A group that does not exist: old versions say ILLEGAL_GENERATION, v9+ GROUP_ID_NOT_FOUND.
        ghost = unique("ghost")
        assert commit(a, 8, ghost, 3, "m", topic, {0: 1}) == {0: ErrorCode.ILLEGAL_GENERATION}
        assert commit(a, 9, ghost, 3, "m", topic, {0: 1}) == {0: ErrorCode.GROUP_ID_NOT_FOUND}
        assert describe(a, ghost).group_state == "Dead"
        assert fetch(a, 8, ghost, None) == {}
        # Partition-level checks.
        assert commit(a, 8, group, gen, member, topic, {9: 1}) == {
            9: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert commit(a, 8, group, gen, member, "no-such-topic", {0: 1}) == {
            0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert commit(a, 8, group, gen, member, topic, {0: 77}, "x" * 5000) == {
            0: ErrorCode.OFFSET_METADATA_TOO_LARGE}
        unchanged()
        assert heartbeat(a, group, gen + 5, member) == ErrorCode.ILLEGAL_GENERATION
        assert heartbeat(a, group, gen, "nobody") == ErrorCode.UNKNOWN_MEMBER_ID
        assert heartbeat(a, unique("ghost"), 1, "nobody") == ErrorCode.UNKNOWN_MEMBER_ID
        assert sync(a, 5, group, gen, member, protocol_name="roundrobin").error_code == \
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL

        # A second member joins: the first learns of the rebalance by heartbeat, may still
        # commit with its generation while the group prepares, then both rejoin.
        pending = b.send(join_request(group, topic=topic), 3)
        time.sleep(0.1)
        assert heartbeat(a, group, gen, member) == ErrorCode.REBALANCE_IN_PROGRESS
        assert commit(a, 8, group, gen, member, topic, {0: 6}, "during") == {0: 0}
        rejoin = a.call(join_request(group, member_id=member, topic=topic), 9)
        b_joined = b.receive(JoinGroupRequest.API_KEY, 3, pending)
        assert rejoin.error_code == 0 and b_joined.error_code == 0
        assert rejoin.generation_id == b_joined.generation_id == gen + 1
        # The old generation is fenced now.
        assert commit(a, 8, group, gen, member, topic, {0: 99}) == {
            0: ErrorCode.ILLEGAL_GENERATION}
        # Until the leader syncs, commits of the new generation wait: REBALANCE_IN_PROGRESS.
        assert commit(b, 8, group, gen + 1, b_joined.member_id, topic, {0: 99}) == {
            0: ErrorCode.REBALANCE_IN_PROGRESS}
        assert fetch(a, 9, group, topic, [0]) == {(topic, 0): (6, "during", 0)}


def test_protocol_checks(group_broker: Any, topic: str) -> None:
    group = unique("protocols")
    with RawClient(group_broker.bootstrap) as a, RawClient(group_broker.bootstrap) as b:
        assert a.call(join_request("", topic=topic), 5).error_code == ErrorCode.INVALID_GROUP_ID
        for session in (100, 1_800_001):
            response = a.call(join_request(group, topic=topic, session_ms=session), 5)
            assert response.error_code == ErrorCode.INVALID_SESSION_TIMEOUT
        empty = a.call(join_request(group, topic=topic, protocols=[]), 3)
        assert empty.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        joined = join(a, 5, group, topic=topic,
                      protocols=[("range", subscription(topic)), ("rr", b"")])
        assert joined.error_code == 0
        wrong_type = b.call(join_request(group, topic=topic, protocol_type="connect"), 3)
        assert wrong_type.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        disjoint = b.call(join_request(group, topic=topic, protocols=[("sticky", b"")]), 3)
        assert disjoint.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert describe(a, group).group_state == "CompletingRebalance"


def test_protocol_vote(group_broker: Any) -> None:
    """Candidates are the protocols all members support; each votes its first candidate."""
    cases = [
        ([["x", "y"], ["y", "x"], ["x", "y"]], "x"),
        ([["a", "b"], ["b", "a"], ["b", "c", "a"]], "b"),
        ([["a", "b", "c"], ["c", "b"], ["b", "c"]], "b"),  # a is no candidate: b 2, c 1
        ([["p", "q"], ["q", "p"]], "p"),  # a tie: BMQ picks the protocol voted for first
    ]
    for preferences, expected in cases:
        group = unique("vote")
        clients = [RawClient(group_broker.bootstrap) for _ in preferences]
        try:
            sent = [c.send(join_request(group, protocols=[(n, n.encode()) for n in prefs]), 3)
                    for c, prefs in zip(clients, preferences, strict=True)]
            answers = [c.receive(JoinGroupRequest.API_KEY, 3, s)
                       for c, s in zip(clients, sent, strict=True)]
        finally:
            for c in clients:
                c.close()
        assert {a.error_code for a in answers} == {0}
        assert {a.protocol_name for a in answers} == {expected}, preferences
        (leader,) = [a for a in answers if a.leader == a.member_id]
        assert {m.metadata for m in leader.members} == {expected.encode()}


# ------------------------------------------------------------------------------ static members

def test_static_member_rejoin_keeps_generation_and_fences_old_id(group_broker: Any,
                                                                 topic: str) -> None:
    group = unique("static")
    with RawClient(group_broker.bootstrap) as a, RawClient(group_broker.bootstrap) as b:
        sa = a.send(join_request(group, topic=topic, instance="inst-a"), 5)
        sb = b.send(join_request(group, topic=topic, instance="inst-b"), 5)
        ja = a.receive(JoinGroupRequest.API_KEY, 5, sa)
        jb = b.receive(JoinGroupRequest.API_KEY, 5, sb)
        assert ja.error_code == jb.error_code == 0
        assert ja.member_id.startswith("inst-a-") and jb.member_id.startswith("inst-b-")
        leader, follower = (ja, jb) if ja.leader == ja.member_id else (jb, ja)
        lc, fc = (a, b) if leader is ja else (b, a)
        linst, finst = ("inst-a", "inst-b") if leader is ja else ("inst-b", "inst-a")
        assert {m.group_instance_id for m in leader.members} == {"inst-a", "inst-b"}
        gen = leader.generation_id
        plan = {leader.member_id: assignment(topic, [0, 1]),
                follower.member_id: assignment(topic, [2, 3])}
        sf = fc.send(SyncGroupRequest(group_id=group, generation_id=gen,
                                      member_id=follower.member_id, group_instance_id=finst), 3)
        assert sync(lc, 3, group, gen, leader.member_id, plan, instance=linst).error_code == 0
        assert fc.receive(SyncGroupRequest.API_KEY, 3, sf).assignment == plan[follower.member_id]

        # The follower restarts (new process, no member id): no rebalance, same generation, its
        # old assignment; the old member id is fenced.
        again = fc.call(join_request(group, topic=topic, instance=finst), 5)
        assert again.error_code == 0
        assert again.generation_id == gen and again.member_id != follower.member_id
        assert again.leader == leader.member_id and again.members == []
        assert describe(a, group).group_state == "Stable"
        synced = sync(fc, 3, group, gen, again.member_id, instance=finst)
        assert (synced.error_code, synced.assignment) == (0, plan[follower.member_id])
        assert heartbeat(fc, group, gen, follower.member_id, 3, finst) == \
            ErrorCode.FENCED_INSTANCE_ID
        assert commit(fc, 7, group, gen, follower.member_id, topic, {2: 1},
                      instance=finst) == {2: ErrorCode.FENCED_INSTANCE_ID}
        assert commit(fc, 7, group, gen, again.member_id, topic, {2: 1},
                      instance=finst) == {2: 0}

        # The leader restarts with JoinGroup v9: it learns the members but must skip assigning.
        relead = lc.call(join_request(group, topic=topic, instance=linst), 9)
        assert relead.error_code == 0 and relead.generation_id == gen
        assert relead.skip_assignment and relead.leader == relead.member_id
        assert {m.group_instance_id for m in relead.members} == {"inst-a", "inst-b"}
        assert describe(a, group).group_state == "Stable"

        # Administrative removal by instance id (LeaveGroup v3+ without a member id).
        left = a.call(LeaveGroupRequest(group_id=group, members=[
            MemberIdentity(member_id="", group_instance_id=finst),
            MemberIdentity(member_id="", group_instance_id="nobody")]), 4)
        assert [r.error_code for r in left.members] == [0, ErrorCode.UNKNOWN_MEMBER_ID]
        assert describe(a, group).group_state == "PreparingRebalance"


# ------------------------------------------------------------------------------ timeouts

def test_session_timeout_removes_silent_member(group_broker: Any, topic: str) -> None:
    group = unique("session")
    with RawClient(group_broker.bootstrap) as a, RawClient(group_broker.bootstrap) as b:
        sa = a.send(join_request(group, topic=topic, session_ms=1000), 3)
        sb = b.send(join_request(group, topic=topic, session_ms=1000), 3)
        ja = a.receive(JoinGroupRequest.API_KEY, 3, sa)
        jb = b.receive(JoinGroupRequest.API_KEY, 3, sb)
        gen = ja.generation_id
        for client, joined in ((a, ja), (b, jb)):
            if joined.leader == joined.member_id:
                leader_client, leader = client, joined
        follower_client = b if leader_client is a else a
        follower = jb if leader is ja else ja
        sf = follower_client.send(SyncGroupRequest(group_id=group, generation_id=gen,
                                                   member_id=follower.member_id), 3)
        assert sync(leader_client, 3, group, gen, leader.member_id).error_code == 0
        assert follower_client.receive(SyncGroupRequest.API_KEY, 3, sf).error_code == 0
        # Only the leader heartbeats; the follower's session lapses after ~1 s.
        start = time.monotonic()
        while heartbeat(leader_client, group, gen, leader.member_id) == 0:
            assert time.monotonic() - start < 5, "the silent member never expired"
            time.sleep(0.1)
        elapsed = time.monotonic() - start
        assert 0.8 <= elapsed <= 2.5, elapsed
        rejoined = leader_client.call(join_request(group, member_id=leader.member_id,
                                                   topic=topic, session_ms=1000), 3)
        assert rejoined.error_code == 0 and rejoined.generation_id == gen + 1
        assert [m.member_id for m in rejoined.members] == [leader.member_id]
        assert heartbeat(follower_client, group, gen, follower.member_id) == \
            ErrorCode.UNKNOWN_MEMBER_ID


def test_rebalance_timeout_removes_member_that_does_not_rejoin(group_broker: Any,
                                                               topic: str) -> None:
    group = unique("rebalance")
    with RawClient(group_broker.bootstrap) as a, RawClient(group_broker.bootstrap) as b:
        sa = a.send(join_request(group, topic=topic, rebalance_ms=1000), 3)
        sb = b.send(join_request(group, topic=topic, rebalance_ms=1000), 3)
        ja = a.receive(JoinGroupRequest.API_KEY, 3, sa)
        jb = b.receive(JoinGroupRequest.API_KEY, 3, sb)
        gen = ja.generation_id
        # a rejoins with a new subscription (a rebalance starts); b keeps heartbeating but
        # never rejoins.
        start = time.monotonic()
        pending = a.send(join_request(group, member_id=ja.member_id, rebalance_ms=1000,
                                      protocols=[("range", subscription(topic, "more"))]), 3)
        time.sleep(0.2)
        assert heartbeat(b, group, gen, jb.member_id) == ErrorCode.REBALANCE_IN_PROGRESS
        rejoined = a.receive(JoinGroupRequest.API_KEY, 3, pending)
        elapsed = time.monotonic() - start
        assert rejoined.error_code == 0 and rejoined.generation_id == gen + 1
        assert [m.member_id for m in rejoined.members] == [ja.member_id]
        assert 0.8 <= elapsed <= 3, elapsed
        assert heartbeat(b, group, gen, jb.member_id) == ErrorCode.UNKNOWN_MEMBER_ID


# ------------------------------------------------------------------------------ admin

def test_list_describe_delete_and_offset_delete(group_broker: Any, topic: str) -> None:
    other = unique("other")
    create_topic(group_broker.bootstrap, other, 2)
    stable, empty = unique("adm-stable"), unique("adm-empty")
    with RawClient(group_broker.bootstrap) as c:
        joined = join(c, 5, stable, topic=topic)
        member = joined.member_id
        assert sync(c, 3, stable, 1, member, {member: assignment(topic, [0])}).error_code == 0
        assert commit(c, 8, stable, 1, member, topic, {0: 1}) == {0: 0}
        assert commit(c, 8, stable, 1, member, other, {0: 2, 1: 3}) == {0: 0, 1: 0}
        # A "simple" group: offsets only, committed without member id and generation.
        assert commit(c, 8, empty, -1, "", topic, {1: 4}) == {1: 0}

        def listed(version: int, **filters: Any) -> dict[str, tuple[str, str]]:
            response = c.call(ListGroupsRequest(**filters), version)
            return {g.group_id: (g.group_state, g.protocol_type) for g in response.groups
                    if g.group_id in (stable, empty)}

        assert listed(4) == {stable: ("Stable", "consumer"), empty: ("Empty", "")}
        assert listed(4, states_filter=["stable"]) == {stable: ("Stable", "consumer")}
        assert listed(4, states_filter=["Empty", "Dead"]) == {empty: ("Empty", "")}
        assert listed(5, types_filter=["classic"]) == listed(4)
        assert listed(5, types_filter=["consumer"]) == {}

        assert c.call(DescribeGroupsRequest(groups=["nope"]), 5).groups[0].group_state == "Dead"
        missing = c.call(DescribeGroupsRequest(groups=["nope"]), 6).groups[0]
        assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        ops = c.call(DescribeGroupsRequest(groups=[stable],
                                           include_authorized_operations=True), 5).groups[0]
        # Kafka 4 without an authorizer: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS.
        assert ops.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
        # Members show where they connect from, as Kafka shows it ("/host").
        assert {m.client_host for m in ops.members} == {"/127.0.0.1"}

        # OffsetDelete: a subscribed topic stays, the other goes.
        deleted = c.call(OffsetDeleteRequest(group_id=stable, topics=[
            OffsetDeleteRequestTopic(name=topic, partitions=[
                OffsetDeleteRequestPartition(partition_index=0)]),
            OffsetDeleteRequestTopic(name=other, partitions=[
                OffsetDeleteRequestPartition(partition_index=0),
                OffsetDeleteRequestPartition(partition_index=1)]),
            OffsetDeleteRequestTopic(name="no-such-topic", partitions=[
                OffsetDeleteRequestPartition(partition_index=0)])]), 0)
        assert deleted.error_code == 0
        assert {(t.name, p.partition_index): p.error_code for t in deleted.topics
                for p in t.partitions} == {
            (topic, 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, (other, 0): 0, (other, 1): 0,
            ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert fetch(c, 8, stable, None) == {(topic, 0): (1, "", 0)}
        ghost = c.call(OffsetDeleteRequest(group_id=unique("ghost")), 0)
        assert ghost.error_code == ErrorCode.GROUP_ID_NOT_FOUND

        # DeleteGroups: only empty groups; then their offsets are gone.
        result = c.call(DeleteGroupsRequest(groups_names=[stable, empty, "nope"]), 2)
        assert {r.group_id: r.error_code for r in result.results} == {
            stable: ErrorCode.NON_EMPTY_GROUP, empty: 0, "nope": ErrorCode.GROUP_ID_NOT_FOUND}
        assert fetch(c, 8, empty, None) == {}
        assert listed(4) == {stable: ("Stable", "consumer")}
        # require_stable: nothing in flight, so committed offsets come back as usual.
        stable_fetch = c.call(OffsetFetchRequest(groups=[OffsetFetchRequestGroup(
            group_id=stable, topics=None)], require_stable=True), 8)
        assert stable_fetch.groups[0].topics[0].partitions[0].committed_offset == 1


def test_offsets_topic_is_internal_and_protected(group_broker: Any) -> None:
    with RawClient(group_broker.bootstrap) as client:
        # Listed like Kafka lists it: flagged internal, so clients can leave it out.
        everything = client.call(MetadataRequest(topics=None), 12)
        internal = {t.name: t.is_internal for t in everything.topics}
        assert internal["__consumer_offsets"] is True
        # (__transaction_state and __share_group_state too, once a transactional producer or
        # a share group, or FindCoordinator asking for them, made the broker create them.)
        assert {name for name, flag in internal.items() if flag} <= {
            "__consumer_offsets", "__transaction_state", "__share_group_state"}
        assert not any(flag for name, flag in internal.items() if not name.startswith("__"))
        asked = client.call(MetadataRequest(topics=[
            MetadataRequestTopic(name="__consumer_offsets")], allow_auto_topic_creation=False),
            12)
        (topic,) = asked.topics
        assert (topic.error_code, topic.is_internal, len(topic.partitions)) == (0, True, 50)
        # Clients may read it but not write or delete it (Kafka: InvalidTopicException).
        records = bytearray(make_batch([b"forged commit"]))
        produced = client.call(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
            TopicProduceData(name="__consumer_offsets", partition_data=[
                PartitionProduceData(index=0, records=records)])]), 9)
        result = produced.responses[0].partition_responses[0]
        assert result.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        deleted = client.call(DeleteTopicsRequest(topic_names=["__consumer_offsets"],
                                                  timeout_ms=5000), 5)
        assert deleted.responses[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        again = client.call(MetadataRequest(topics=None), 12)
        assert "__consumer_offsets" in {t.name for t in again.topics}
