"""The share coordinator's fence of old data leaders survives the coordinator: a key's newest
leader epoch is in its records, so the broker that loads the ``__share_group_state``
partition next (after a move or a restart) still refuses the writes of a leader that lost the
data partition. Seen in the CI fault run as a record accepted (answered ok by a frozen old
leader, whose write the next coordinator took) and later dead-lettered by the new leader,
which had read the state before that write.

A real Broker in-process (partition logs on a temporary directory) drives
``broker.share.state_log`` as the leaders' BmqShareState requests do.
"""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bmq.broker.server import standalone_broker
from bmq.config import Config
from bmq.coordinators.share.partition import RecordState, Run
from bmq.coordinators.share.records import StateKey, StateRecord
from bmq.coordinators.share.state import ShareStateCoordinator
from bmq.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(60)

OLD, NEW = 3, 4       # the data partition's leader epochs before and after it moved


def accept(key: StateKey, offset: int) -> StateRecord:
    return StateRecord(key, False, 0, [Run(offset, offset, RecordState.ACKNOWLEDGED, 1)])


async def write(state_log: ShareStateCoordinator, epoch: int, record: StateRecord) -> ErrorCode:
    return await state_log.durable(state_log.write_for_leader(record.key, epoch, record))


async def read(state_log: ShareStateCoordinator, key: StateKey, epoch: int) -> ErrorCode:
    appended, _ = state_log.read_for_leader(key, epoch)
    return await state_log.durable(appended)


@pytest.mark.parametrize("move", ["reload", "restart"])
@pytest.mark.parametrize("has_state", [True, False])
def test_an_old_leader_stays_fenced_after_the_coordinator_moves(
        tmp_path: Path, move: str, has_state: bool) -> None:
    """The new leader reads the key (epoch 4); the coordinator's partition is loaded again
    (unloaded and loaded, as when it moves away and back, or the broker restarts); the old
    leader's accept (epoch 3) is refused with FENCED_LEADER_EPOCH and the state does not
    change; the new leader's writes still go through. Also for a key the old leader had not
    written yet (a read of a key with no state makes none)."""

    async def main() -> None:
        executor = ThreadPoolExecutor(4)
        config = Config(data_dir=str(tmp_path), share_coordinator_state_topic_num_partitions=2)
        broker = standalone_broker(config, executor)
        await broker.start()
        try:
            state_log = broker.share.state_log
            assert await state_log.ensure_started()
            key = StateKey("group", uuid.uuid4(), 0)
            if has_state:
                assert await write(state_log, OLD, StateRecord(key, True, 0, [])) \
                    == ErrorCode.NONE
            assert await read(state_log, key, NEW) == ErrorCode.NONE
            if move == "reload":
                index = state_log.index_of(key)
                state_log.unload_partition(index)
                await state_log.load_partition(index)
            else:
                await broker.stop()
                broker = standalone_broker(config, executor)
                await broker.start()
                state_log = broker.share.state_log
                assert await state_log.ensure_started()
            assert (state_log.state(key) is not None) == has_state
            assert state_log.write_for_leader(key, OLD, accept(key, 0)) \
                == ErrorCode.FENCED_LEADER_EPOCH
            state = state_log.state(key)
            assert state is None or all(r.state != RecordState.ACKNOWLEDGED for r in state.runs)
            if not has_state:
                assert await write(state_log, NEW, StateRecord(key, True, 0, [])) \
                    == ErrorCode.NONE
            assert await write(state_log, NEW, accept(key, 1)) == ErrorCode.NONE
            state = state_log.state(key)
            assert state is not None
            assert [(r.first, r.state) for r in state.runs if r.state ==
                    RecordState.ACKNOWLEDGED] == [(1, RecordState.ACKNOWLEDGED)]
        finally:
            await broker.stop()
            executor.shutdown()

    asyncio.run(main())
