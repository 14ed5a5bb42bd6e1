"""A data partition's leader holds one copy of each share-partition: a read of the state that
was under way while a fetch made the share-partition does not drop or replace that copy.

Seen in the CI fault run (test_share_and_scheduled_under_kill_and_freeze, seed 3), before any
fault: three share consumers retried their first fetches of a partition while its state's
coordinator (another broker) loaded. The leader's read answered "no state yet"; one fetch
made the share-partition, another acquired offsets 0..10 from it (delivery count 1), and a
third fetch, arriving between that answer and the making, had started a second read, which
dropped the copy when it began and, answered "no state" too, let its fetch make a new one and
acquire 0..10 again with delivery count 1. Both were written (one leader, one leader epoch:
the coordinator cannot tell the copies apart) and both consumers got the records.

A real Broker in-process (partition logs on a temporary directory) keeps the state
(``broker.share.state_log``) and the data partition; the leader's share state reaches it
through ``Hop``, BmqShareState in-process, whose read answers when the test lets it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bmq.broker.broker import Broker
from bmq.broker.server import standalone_broker
from bmq.config import Config
from bmq.coordinators.clock import steady_now_ms
from bmq.coordinators.sharded import Appended
from bmq.coordinators.share.leader import LeaderShareState
from bmq.coordinators.share.partition import AckType, ShareSettings
from bmq.coordinators.share.records import StateKey, StateRecord
from bmq.coordinators.share.state import ShareStateCoordinator
from bmq.protocol.errors import ErrorCode, KafkaError

pytestmark = pytest.mark.timeout(60)

RECORDS = 11          # offsets 0..10 in the data partition
SETTINGS = ShareSettings()


class Hop:
    """The leader's BmqShareState requests to the coordinator (bmq.broker.share_peers and
    bmq.broker.handlers.share_state), in-process: each request reaches the coordinator in the
    order sent, when its task first runs, as over the link; a read is answered once the test
    calls ``answer_reads`` (the network and the coordinator's flush in between)."""

    def __init__(self, state_log: ShareStateCoordinator, here: bool) -> None:
        self._log = state_log
        self._here = here       # the coordinator is the leader itself: writes applied at once
        self.reads_arrived = 0
        self._answer = asyncio.Event()

    def answer_reads(self) -> None:
        self._answer.set()

    def hold_reads(self) -> None:
        self._answer.clear()

    def write(self, key: StateKey, leader_epoch: int, record: StateRecord) -> Appended:
        if self._here:
            return self._log.write_for_leader(key, leader_epoch, record)
        return asyncio.ensure_future(self._write(key, leader_epoch, record))

    async def _write(self, key: StateKey, leader_epoch: int, record: StateRecord) -> None:
        code = await self._log.durable(self._log.write_for_leader(key, leader_epoch, record))
        if code != ErrorCode.NONE:
            raise KafkaError(code)

    async def read(self, key: StateKey, leader_epoch: int
                   ) -> tuple[ErrorCode, StateRecord | None]:
        self.reads_arrived += 1
        appended, state = self._log.read_for_leader(key, leader_epoch)
        code = await self._log.durable(appended)
        await self._answer.wait()
        if code != ErrorCode.NONE or state is None:
            return code, None
        return code, StateRecord(key, True, state.start_offset, list(state.runs))

    async def append_elsewhere(self, topic: str, index: int, batch: bytes) -> None:
        raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "no dead letters in this test")


def with_a_broker(tmp_path: Path, scenario: Callable[[Broker], Awaitable[None]]) -> None:
    """Run ``scenario`` against a real Broker in-process (partition logs in ``tmp_path``)."""

    async def main() -> None:
        with ThreadPoolExecutor(4) as executor:
            broker = standalone_broker(Config(data_dir=str(tmp_path),
                                              share_coordinator_state_topic_num_partitions=1),
                                       executor)
            await broker.start()
            try:
                await scenario(broker)
            finally:
                await broker.stop()

    asyncio.run(main())


@pytest.mark.parametrize("coordinator", ["elsewhere", "here"])
def test_a_read_under_way_while_a_fetch_makes_the_share_partition_keeps_it(
        tmp_path: Path, coordinator: str) -> None:
    """Fetches X and A wait for the leader's first read (no state yet); fetch B comes before
    X makes the share-partition and starts a second read; X makes it and A acquires 0..10.
    Once B's read is answered, B finds A's share-partition, not another: it acquires none of
    0..10, A's acknowledgement of them is accepted, and the coordinator keeps them A's.
    Without the fix: with the coordinator on another broker B's read reaches it before X's
    write, is answered "no state", and B acquires 0..10 with delivery count 1 too, both
    written (the CI run); with the coordinator on the leader itself the read finds A's
    acquisition, and the copy it makes (locks ended, as after a restart) refuses A's
    acknowledgement (INVALID_RECORD_STATE)."""

    with_a_broker(tmp_path, lambda broker: fetches_meet_a_second_read(
        broker, coordinator == "here"))


async def fetches_meet_a_second_read(broker: Broker, here: bool) -> None:
    state_log = broker.share.state_log
    assert await state_log.ensure_started()
    await broker.create_topic("orders", 1)
    partition = await broker.served_partition("orders", 0)
    hop = Hop(state_log, here)
    leader = LeaderShareState(state_log, hop, broker.partitions)
    key = StateKey("group", uuid.uuid4(), 0)

    first_read = asyncio.ensure_future(leader.prepare(key, partition))     # X's and A's
    hop.answer_reads()
    assert await first_read == ErrorCode.NONE and leader.state(key) is None
    hop.hold_reads()
    second_read = asyncio.ensure_future(leader.prepare(key, partition))    # B's
    await asyncio.sleep(0)          # B's fetch runs: a second read starts...
    assert hop.reads_arrived == 1 and not second_read.done()     # ...not sent yet

    state_a, made = leader.create(key, 0, partition)                    # X makes it
    acquired_a = state_a.acquire("member-a", 500, RECORDS, steady_now_ms(), SETTINGS)  # A
    written_a = leader.persist(key, state_a)
    assert [(a.first, a.last, a.count) for a in acquired_a] == [(0, RECORDS - 1, 1)]
    await asyncio.sleep(0.01)
    assert hop.reads_arrived == 2            # B's read went after X made it
    assert await leader.durable(made) == ErrorCode.NONE
    assert await leader.durable(written_a) == ErrorCode.NONE

    hop.answer_reads()
    assert await second_read == ErrorCode.NONE
    state_b = leader.state(key)
    if state_b is None:                      # B's fetch makes it, as _resolve does
        state_b, made_b = leader.create(key, 0, partition)
        assert await leader.durable(made_b) == ErrorCode.NONE
    acquired_b = state_b.acquire("member-b", 500, RECORDS, steady_now_ms(), SETTINGS)
    if acquired_b:
        assert await leader.durable(leader.persist(key, state_b)) == ErrorCode.NONE
    assert [(a.first, a.last, a.count) for a in acquired_b] == [], \
        "records 0..10 acquired again with delivery count 1"
    held = leader.state(key)
    assert held is not None
    assert held.check_ack("member-a", 0, RECORDS - 1, [AckType.ACCEPT]) == ErrorCode.NONE
    stored = state_log.state(key)
    assert stored is not None
    assert {(r.first, r.last, r.member, r.count) for r in stored.runs} == \
        {(0, RECORDS - 1, "member-a", 1)}


def test_a_read_for_an_older_opening_is_not_taken_for_the_new_one(tmp_path: Path) -> None:
    """A fetch of the partition opened again (a new leadership) while a read for its last
    opening is under way waits for that read and reads for the new opening: the share-partition
    it then uses is held for the partition it fetches from. Without it, the fetch shared the
    old opening's read and used a copy held for the closed partition; the next fetch read the
    state again (locks ended, as after a restart) and refused the first one's acknowledgement
    (INVALID_RECORD_STATE)."""

    with_a_broker(tmp_path, a_read_meets_a_new_opening)


async def a_read_meets_a_new_opening(broker: Broker) -> None:
    state_log = broker.share.state_log
    assert await state_log.ensure_started()
    await broker.create_topic("orders", 1)
    old = await broker.served_partition("orders", 0)
    hop = Hop(state_log, here=True)
    hop.answer_reads()
    leader = LeaderShareState(state_log, hop, broker.partitions)
    key = StateKey("group", uuid.uuid4(), 0)
    assert await leader.prepare(key, old) == ErrorCode.NONE
    _, made = leader.create(key, 0, old)
    assert await leader.durable(made) == ErrorCode.NONE
    leader.forget(key)                       # (as after a coordinator's rewrite)

    hop.hold_reads()
    read_for_old = asyncio.ensure_future(leader.prepare(key, old))
    await asyncio.sleep(0)
    await broker.partitions.close("orders", 0)
    new = await broker.served_partition("orders", 0)
    assert new is not old
    read_for_new = asyncio.ensure_future(leader.prepare(key, new))
    await asyncio.sleep(0.01)
    hop.answer_reads()
    assert await read_for_old == ErrorCode.NONE
    assert await read_for_new == ErrorCode.NONE

    state = leader.state(key)
    assert state is not None
    acquired = state.acquire("member-a", 500, RECORDS, steady_now_ms(), SETTINGS)
    assert [(a.first, a.last, a.count) for a in acquired] == [(0, RECORDS - 1, 1)]
    assert await leader.durable(leader.persist(key, state)) == ErrorCode.NONE
    assert await leader.prepare(key, new) == ErrorCode.NONE      # the next fetch
    assert leader.state(key) is state, "the share-partition was read again"
    assert state.check_ack("member-a", 0, RECORDS - 1, [AckType.ACCEPT]) == ErrorCode.NONE


class FailingHop(Hop):
    """Writes refused while ``failing`` (the coordinator moved, say)."""

    failing = False

    def write(self, key: StateKey, leader_epoch: int, record: StateRecord) -> Appended:
        if self.failing:
            return ErrorCode.NOT_COORDINATOR
        return super().write(key, leader_epoch, record)


def test_a_copy_read_again_after_a_failed_write_does_not_answer_that_failure(
        tmp_path: Path) -> None:
    """A failed write drops the leader's copy; the copy read again before the next fetch has
    nothing unwritten, so persisting it with no change answers NONE (it answered the dropped
    copy's NOT_COORDINATOR: a spurious error to that fetch)."""

    with_a_broker(tmp_path, a_write_fails)


async def a_write_fails(broker: Broker) -> None:
    state_log = broker.share.state_log
    assert await state_log.ensure_started()
    await broker.create_topic("orders", 1)
    partition = await broker.served_partition("orders", 0)
    hop = FailingHop(state_log, here=True)
    hop.answer_reads()
    leader = LeaderShareState(state_log, hop, broker.partitions)
    key = StateKey("group", uuid.uuid4(), 0)
    assert await leader.prepare(key, partition) == ErrorCode.NONE
    state, made = leader.create(key, 0, partition)
    assert await leader.durable(made) == ErrorCode.NONE
    hop.failing = True
    state.acquire("member-a", 500, RECORDS, steady_now_ms(), SETTINGS)
    assert leader.persist(key, state) == ErrorCode.NOT_COORDINATOR
    assert leader.state(key) is None         # dropped: read again before use
    hop.failing = False
    assert await leader.prepare(key, partition) == ErrorCode.NONE
    again = leader.state(key)
    assert again is not None and again is not state
    assert await leader.durable(leader.persist(key, again)) == ErrorCode.NONE
