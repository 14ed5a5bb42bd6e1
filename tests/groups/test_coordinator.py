"""The group coordinator in-process, without sockets: state machine, timing, log and replay.

Each test runs a real Broker (real partition logs on a temporary directory) on its own event
loop and drives ``broker.groups`` directly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest

from bmq.broker.broker import Broker
from bmq.broker.server import standalone_broker
from bmq.config import Config
from bmq.coordinators.groups import GroupState, JoinRequest, java_string_hashcode, partition_for
from bmq.coordinators.groups.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_record,
    encode_key,
    encode_value,
)
from bmq.protocol.errors import ErrorCode
from bmq.protocol.record_codec import build_batch, iter_records
from bmq.protocol.records import validate_batches

from .helpers import subscription

pytestmark = pytest.mark.timeout(60)

T = TypeVar("T")
TOPIC = "events"


def run(test: Callable[..., Awaitable[T]], path: Path, **settings: Any) -> T:
    """Run ``test(open_broker)`` on a fresh loop; ``open_broker()`` starts a Broker on
    ``path`` (again: a restart) with the given settings."""

    async def main() -> T:
        executor = ThreadPoolExecutor(4)
        brokers: list[Broker] = []

        async def open_broker() -> Broker:
            config = Config(data_dir=str(path), **{
                "group_initial_rebalance_delay_ms": 50, "group_min_session_timeout_ms": 100,
                "offsets_topic_num_partitions": 4, **settings})
            broker = standalone_broker(config, executor)
            await broker.start()
            if broker.topics.get(TOPIC) is None:
                await broker.create_topic(TOPIC, 4)
            brokers.append(broker)
            return broker

        try:
            return await test(open_broker)
        finally:
            for broker in brokers:
                await broker.stop()
            executor.shutdown()

    return asyncio.run(main())


def join_request(group: str, member_id: str = "", *, instance: str | None = None,
                 session_ms: int = 10_000, rebalance_ms: int = 10_000,
                 protocols: list[tuple[str, bytes]] | None = None,
                 require_known: bool = False) -> JoinRequest:
    return JoinRequest(
        group_id=group, member_id=member_id, group_instance_id=instance,
        protocol_type="consumer",
        protocols=protocols if protocols is not None else [("range", subscription(TOPIC))],
        session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms, client_id="unit",
        require_known_member_id=require_known)


async def form_group(broker: Broker, group: str, members: int, static: bool = False,
                     **kwargs: Any) -> list[Any]:
    """``members`` members join at once and sync; returns their JoinResults (leader first).
    Static members get instance ids i0, i1, ..."""
    joined = await asyncio.gather(*(broker.groups.join_group(join_request(
        group, instance=f"i{i}" if static else None, **kwargs)) for i in range(members)))
    assert {j.error for j in joined} == {ErrorCode.NONE}
    joined.sort(key=lambda j: j.member_id != j.leader_id)
    leader = joined[0]
    plan = {j.member_id: f"assignment of {j.member_id}".encode() for j in joined}
    synced = await asyncio.gather(*(
        broker.groups.sync_group(group, j.generation_id, j.member_id, None, None, None,
                                 plan if j is leader else {}) for j in joined))
    assert [s.assignment for s in synced] == [plan[j.member_id] for j in joined]
    group_state = broker.groups.group(group)
    assert group_state is not None and group_state.is_(GroupState.STABLE)
    return joined


def offset(value: int, metadata: str = "", now: int = -1) -> OffsetValue:
    return OffsetValue(offset=value, metadata=metadata,
                       commit_timestamp=now if now >= 0 else int(time.time() * 1000))


# ------------------------------------------------------------------------------ pure parts

def test_java_string_hashcode_and_placement() -> None:
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("Hello") == 69609650
    # The famous string whose hashCode is Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0.
    assert java_string_hashcode("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0
    # Characters outside the BMP count as two UTF-16 code units, as in Java.
    assert java_string_hashcode("\U0001F600") == 0xD83D * 31 + 0xDE00
    assert {partition_for(f"group-{i}", 50) for i in range(1000)} == set(range(50))


def test_offsets_log_records_round_trip() -> None:
    group_value = GroupValue(
        protocol_type="consumer", generation=7, protocol_name="range", leader="m1",
        state_timestamp=123, members=[MemberValue("m1", "i1", "c", "/h", 3000, 6000,
                                                  b"sub", b"asg"),
                                      MemberValue("m2", None, "c2", "", 1, 2, b"", b"")])
    entries: list[tuple[Any, Any]] = [
        (OffsetKey("g", "t", 3), OffsetValue(42, 5, "meta \u00e9", 1000, -1)),
        (OffsetKey("g", "t", 4), None),
        (GroupKey("g"), group_value),
        (GroupKey("g2"), None),
    ]
    batch, header = build_batch([(encode_key(k), encode_value(v)) for k, v in entries], 99)
    assert [h.record_count for h in validate_batches(memoryview(batch), 1 << 20)] == [4]
    assert header.max_timestamp == 99
    decoded = [decode_record(r.key, r.value) for r in iter_records(bytes(batch))]
    assert decoded == entries
    assert decode_record(b"\x00\x09unknown", b"") is None  # a key type from the future


# ------------------------------------------------------------------------------ rebalancing

async def _arrivals(broker: Broker, group: str, delays: list[float]) -> list[float]:
    """Members join after these delays; returns when each got its JoinGroup answer."""
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def member(after: float) -> tuple[Any, float]:
        await asyncio.sleep(after)
        result = await broker.groups.join_group(join_request(group))
        return result, loop.time() - start

    results = await asyncio.gather(*(member(d) for d in delays))
    assert {r.generation_id for r, _ in results} == {1}
    assert sorted(len(r.members) for r, _ in results) == [0] * (len(delays) - 1) + [
        len(delays)]
    return [elapsed for _, elapsed in results]


def test_initial_delay_waits_for_members_arriving_one_after_another(tmp_path: Path) -> None:
    async def test(open_broker: Callable[[], Awaitable[Broker]]) -> None:
        broker = await open_broker()
        # Each arrival restarts the 0.3 s delay: the last one (0.4 s) is still included.
        for elapsed in await _arrivals(broker, "slow-joiners", [0, 0.2, 0.4]):
            assert 0.65 <= elapsed <= 1.1, elapsed
        # Members starting together: one delay after the last of them, not two delays.
        for elapsed in await _arrivals(broker, "quick-joiners", [0, 0.05, 0.1]):
            assert 0.38 <= elapsed <= 0.6, elapsed

    run(test, tmp_path, group_initial_rebalance_delay_ms=300)


def test_three_members_stable_within_a_second_after_the_delay(tmp_path: Path) -> None:
    async def test(open_broker: Callable[[], Awaitable[Broker]]) -> None:
        broker = await open_broker()
        loop = asyncio.get_running_loop()
        start = loop.time()
        # JoinGroup v4+ flow: MEMBER_ID_REQUIRED first, then join with the given id.
        first = await asyncio.gather(*(broker.groups.join_group(
            join_request("quick", require_known=True)) for _ in range(3)))
        assert {f.error for f in first} == {ErrorCode.MEMBER_ID_REQUIRED}
        joined = await asyncio.gather(*(broker.groups.join_group(
            join_request("quick", f.member_id, require_known=True)) for f in first))
        leader = next(j for j in joined if j.member_id == j.leader_id)
        synced = await asyncio.gather(*(broker.groups.sync_group(
            "quick", j.generation_id, j.member_id, None, None, None,
            {m: b"x" for m, _, _ in leader.members} if j is leader else {}) for j in joined))
        assert {s.error for s in synced} == {ErrorCode.NONE}
        elapsed = loop.time() - start
        assert elapsed <= 0.5 + 1.0, elapsed

    run(test, tmp_path, group_initial_rebalance_delay_ms=500)


def test_pending_member_that_never_rejoins_only_delays_until_its_session_ends(
        tmp_path: Path) -> None:
    async def test(open_broker: Callable[[], Awaitable[Broker]]) -> None:
        broker = await open_broker()
        groups = broker.groups
        (a,) = await form_group(broker, "pending", 1)
        loop = asyncio.get_running_loop()
        # A new member gets its id (KIP-394) but never comes back.
        ghost = await groups.join_group(join_request("pending", require_known=True,
                                                     session_ms=400))
        assert ghost.error == ErrorCode.MEMBER_ID_REQUIRED
        # Another member joins: rebalance; a rejoins; the pending id holds up completion.
        start = loop.time()
        b_join = asyncio.ensure_future(groups.join_group(join_request("pending")))
        await asyncio.sleep(0.05)
        a_join = await groups.join_group(join_request("pending", a.member_id))
        b_result = await b_join
        elapsed = loop.time() - start
        assert a_join.generation_id == b_result.generation_id == 2
        assert 0.3 <= elapsed <= 1.0, elapsed  # the ghost's session, not the 10 s timeout

    run(test, tmp_path)


def test_leader_leaving_during_sync_rebalances_and_answers_waiters(tmp_path: Path) -> None:
    async def test(open_broker: Callable[[], Awaitable[Broker]]) -> None:
        broker = await open_broker()
        groups = broker.groups
        joined = await asyncio.gather(*(groups.join_group(join_request("leaving"))
                                        for _ in range(2)))
        leader = next(j for j in joined if j.member_id == j.leader_id)
        follower = next(j for j in joined if j is not leader)
        waiting = asyncio.ensure_future(groups.sync_group(
            "leaving", follower.generation_id, follower.member_id, None, None, None, {}))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        error, results = groups.leave_group("leaving", [(leader.member_id, None, None)])
        assert (error, results) == (ErrorCode.NONE, [ErrorCode.NONE])
        assert (await waiting).error == ErrorCode.REBALANCE_IN_PROGRESS
        again = await groups.join_group(join_request("leaving", follower.member_id))
        assert again.generation_id == 2 and again.leader_id == follower.member_id

    run(test, tmp_path)


# ------------------------------------------------------------------------------ durability

def test_offsets_and_group_metadata_replay_after_restart(tmp_path: Path) -> None:
    async def test(open_broker: Callable[[], Awaitable[Broker]]) -> None:
        broker = await open_broker()
        groups = broker.groups
        joined = await form_group(broker, "consumers", 2, static=True)
        leader = joined[0]
        before = groups.group("consumers")
        assert before is not None
        assert await groups.commit_offsets(
            "consumers", leader.generation_id, leader.member_id, None,
            {(TOPIC, 0): offset(10, "ten"), (TOPIC, 1): offset(11)}) == {
            (TOPIC, 0): ErrorCode.NONE, (TOPIC, 1): ErrorCode.NONE}
        for i in range(5):  # later commits win
            await groups.commit_offsets("simple", -1, "", None, {(TOPIC, 2): offset(i)})
        await groups.commit_offsets("doomed", -1, "", None, {(TOPIC, 3): offset(3)})
        await groups.commit_offsets("trimmed", -1, "", None, {(TOPIC, 0): offset(1),
                                                              (TOPIC, 1): offset(2)})
        assert await groups.delete_groups(["doomed"]) == {"doomed": ErrorCode.NONE}
        assert await groups.delete_offsets("trimmed", [(TOPIC, 0)]) == (
            ErrorCode.NONE, {(TOPIC, 0): ErrorCode.NONE})
        members = {m.member_id: (m.group_instance_id, m.assignment, m.session_timeout_ms)
                   for m in before.members.values()}
        await broker.stop()

        broker = await open_broker()
        groups = broker.groups
        after = groups.group("consumers")
        assert after is not None
        assert after.state is GroupState.STABLE
        assert (after.generation, after.protocol_type, after.protocol_name, after.leader_id) \
            == (before.generation, "consumer", "range", leader.member_id)
        assert {m.member_id: (m.group_instance_id, m.assignment, m.session_timeout_ms)
                for m in after.members.values()} == members
        assert after.static_members == before.static_members
        assert groups.heartbeat("consumers", leader.member_id, None,
                                leader.generation_id) == ErrorCode.NONE

        def fetched(group: str) -> dict[tuple[str, int], tuple[int, str | None]]:
            error, results = groups.fetch_offsets(group, None)
            assert error == ErrorCode.NONE
            return {(f.topic, f.partition): (f.offset, f.metadata) for f in results}

        assert fetched("consumers") == {(TOPIC, 0): (10, "ten"), (TOPIC, 1): (11, "")}
        assert fetched("simple") == {(TOPIC, 2): (4, "")}
        assert fetched("doomed") == {}
        assert groups.group("doomed") is None
        assert fetched("trimmed") == {(TOPIC, 1): (2, "")}

    run(test, tmp_path)


def test_offset_expiration_writes_tombstones(tmp_path: Path) -> None:
    minute = 60_000

    async def test(open_broker: Callable[[], Awaitable[Broker]]) -> None:
        broker = await open_broker()
        groups = broker.groups
        now = int(time.time() * 1000)
        # A standalone consumer's offsets expire by commit time.
        await groups.commit_offsets("standalone", -1, "", None, {(TOPIC, 0): offset(5)})
        # A live consumer group keeps offsets of topics it subscribes to.
        (member,) = await form_group(broker, "live", 1)
        await groups.commit_offsets("live", member.generation_id, member.member_id, None,
                                    {(TOPIC, 0): offset(1), ("elsewhere", 0): offset(2)})
        # An empty consumer group: everything expires a retention after it became empty.
        (gone,) = await form_group(broker, "left", 1)
        await groups.commit_offsets("left", gone.generation_id, gone.member_id, None,
                                    {(TOPIC, 0): offset(7)})
        groups.leave_group("left", [(gone.member_id, None, None)])
        await asyncio.sleep(0.05)

        assert await groups.expire_offsets(now + minute // 2) == 0
        assert await groups.expire_offsets(now + 2 * minute) == 3
        assert groups.group("standalone") is None and groups.group("left") is None
        live = groups.group("live")
        assert live is not None and set(live.offsets) == {(TOPIC, 0)}
        await broker.stop()

        broker = await open_broker()
        assert broker.groups.group("standalone") is None
        assert broker.groups.group("left") is None
        live = broker.groups.group("live")
        assert live is not None and set(live.offsets) == {(TOPIC, 0)}

    run(test, tmp_path, offsets_retention_minutes=1)


def test_concurrent_commits_share_flushes(tmp_path: Path) -> None:
    async def test(open_broker: Callable[[], Awaitable[Broker]]) -> None:
        broker = await open_broker()
        groups = broker.groups
        shard = groups.shards[groups.partition_for("busy")]
        flushes = 0
        original = shard.partition.log.flush

        def counting_flush(publish: bool = True) -> int:
            nonlocal flushes
            flushes += 1
            return original(publish)

        shard.partition.log.flush = counting_flush  # type: ignore[method-assign]
        results = await asyncio.gather(*(
            groups.commit_offsets("busy", -1, "", None, {(TOPIC, i % 4): offset(i)})
            for i in range(400)))
        assert all(r == {(TOPIC, i % 4): ErrorCode.NONE} for i, r in enumerate(results))
        assert flushes < 40, flushes
        _, fetched = groups.fetch_offsets("busy", None)
        assert {(f.partition, f.offset) for f in fetched} == {(0, 396), (1, 397), (2, 398),
                                                               (3, 399)}

    run(test, tmp_path)


def test_unloading_a_partition_answers_waiters_and_loading_restores(tmp_path: Path) -> None:
    async def test(open_broker: Callable[[], Awaitable[Broker]]) -> None:
        broker = await open_broker()
        groups = broker.groups
        (member,) = await form_group(broker, "moving", 1)
        await groups.commit_offsets("moving", member.generation_id, member.member_id, None,
                                    {(TOPIC, 0): offset(9)})
        rejoin = asyncio.ensure_future(groups.join_group(join_request("moving")))
        await asyncio.sleep(0.05)
        index = groups.partition_for("moving")
        groups.unload_partition(index)
        assert (await rejoin).error == ErrorCode.NOT_COORDINATOR
        assert groups.heartbeat("moving", member.member_id, None, 1) == \
            ErrorCode.NOT_COORDINATOR
        await groups.load_partition(index)
        loaded = groups.group("moving")
        assert loaded is not None and loaded.state is GroupState.STABLE
        assert loaded.offsets[(TOPIC, 0)].offset == 9

    run(test, tmp_path)


def test_offsets_log_is_snapshotted_and_still_replays(tmp_path: Path) -> None:
    async def test(open_broker: Callable[[], Awaitable[Broker]]) -> None:
        broker = await open_broker()
        groups = broker.groups
        names = ["compact-a", "compact-b", "compact-c"]
        shards = {groups.partition_for(name) for name in names}
        for round_ in range(300):
            await asyncio.gather(*(
                groups.commit_offsets(name, -1, "", None,
                                      {(TOPIC, p): offset(round_ * 10 + p, f"r{round_}")
                                       for p in range(4)})
                for name in names))
        await groups.delete_groups(["compact-c"])
        for _ in range(50):  # let the last snapshot and deletion finish
            if all(not groups.shards[i].snapshots.running for i in shards):
                break
            await asyncio.sleep(0.05)
        logs = [groups.shards[i].partition.log for i in shards]
        assert all(log.log_start_offset > 0 for log in logs)
        # 3600 commits of ~90 bytes were written; far fewer bytes remain.
        assert sum(log.size_bytes for log in logs) < 100_000
        await broker.stop()

        broker = await open_broker()
        for name in names[:2]:
            _, fetched = broker.groups.fetch_offsets(name, None)
            assert {(f.partition, f.offset, f.metadata) for f in fetched} == {
                (p, 2990 + p, "r299") for p in range(4)}
        assert broker.groups.group("compact-c") is None

    run(test, tmp_path, offsets_topic_segment_bytes=16_384)


def test_require_stable_reports_commits_in_flight(tmp_path: Path) -> None:
    async def test(open_broker: Callable[[], Awaitable[Broker]]) -> None:
        broker = await open_broker()
        groups = broker.groups
        await groups.commit_offsets("stable", -1, "", None, {(TOPIC, 0): offset(1)})
        in_flight = asyncio.ensure_future(
            groups.commit_offsets("stable", -1, "", None, {(TOPIC, 0): offset(2)}))
        await asyncio.sleep(0)  # the commit is appended, its flush not yet done
        _, unstable = groups.fetch_offsets("stable", [(TOPIC, 0), (TOPIC, 1)],
                                           require_stable=True)
        assert [(f.offset, f.error) for f in unstable] == [
            (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT), (-1, ErrorCode.NONE)]
        _, current = groups.fetch_offsets("stable", [(TOPIC, 0)])
        assert [(f.offset, f.error) for f in current] == [(1, ErrorCode.NONE)]
        assert await in_flight == {(TOPIC, 0): ErrorCode.NONE}
        _, done = groups.fetch_offsets("stable", [(TOPIC, 0)], require_stable=True)
        assert [(f.offset, f.error) for f in done] == [(2, ErrorCode.NONE)]

    run(test, tmp_path)


def test_leave_group_batch(tmp_path: Path) -> None:
    async def test(open_broker: Callable[[], Awaitable[Broker]]) -> None:
        broker = await open_broker()
        groups = broker.groups
        a, b, c = await form_group(broker, "batch", 3)
        error, results = groups.leave_group("batch", [
            (a.member_id, None, "bye"), ("stranger", None, None), (b.member_id, "wrong", None),
            (c.member_id, None, None)])
        assert error == ErrorCode.NONE
        assert results == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.NONE,
                           ErrorCode.NONE]
        await asyncio.sleep(0.05)
        group = groups.group("batch")
        assert group is not None and group.state is GroupState.EMPTY and group.generation == 2
        assert groups.leave_group("nobody-here", [("x", None, None)]) == (
            ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID])
        assert groups.leave_group("", [("x", None, None)]) == (ErrorCode.INVALID_GROUP_ID, [])

    run(test, tmp_path)
