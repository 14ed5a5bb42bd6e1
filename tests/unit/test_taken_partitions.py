"""A cluster broker's partitions taken and opened on first use (bmq.broker.membership.taken):
a request's open and the background's are one open; a partition moved away while it opens is
dropped after the open ends; a fenced one is forgotten, one that failed otherwise stays taken
and is opened again (by the next request, or by the background)."""

from __future__ import annotations

import asyncio

import pytest

from bmq.broker.membership.taken import TakenPartitions
from bmq.metadata.topics import TopicPartition
from bmq.storage import FencedEpochError


class Storage:
    """Opens that take ``delay`` seconds and fail while ``failures`` says so."""

    def __init__(self, delay: float = 0.01) -> None:
        self.delay = delay
        self.opened: list[tuple[TopicPartition, int]] = []
        self.failures: dict[TopicPartition, BaseException] = {}

    async def open(self, tp: TopicPartition, epoch: int) -> None:
        await asyncio.sleep(self.delay)
        failure = self.failures.get(tp)
        if failure is not None:
            raise failure
        self.opened.append((tp, epoch))


def test_the_background_opens_every_partition_once_and_requests_share_the_opens() -> None:
    async def scenario() -> None:
        storage = Storage()
        taken = TakenPartitions(storage.open)
        for index in range(100):
            taken.take(("t", index), 3)
        assert taken.epoch(("t", 7)) == 3
        await asyncio.gather(*(taken.open(("t", index)) for index in (99, 98, 99)))
        while taken:
            await asyncio.sleep(0.01)
        assert sorted(storage.opened) == [(("t", i), 3) for i in range(100)]
        await taken.open(("t", 5))          # opened already: nothing more
        assert len(storage.opened) == 100
    asyncio.run(scenario())


def test_a_partition_dropped_while_it_opens_is_forgotten_after_the_open() -> None:
    async def scenario() -> None:
        storage = Storage(delay=0.2)
        taken = TakenPartitions(storage.open)
        taken.take(("t", 0), 1)
        opening = asyncio.ensure_future(taken.open(("t", 0)))
        await asyncio.sleep(0.05)
        await taken.drop(("t", 0))          # returns once the open ended: then it is closed
        assert storage.opened == [(("t", 0), 1)] and not taken
        await opening
    asyncio.run(scenario())


def test_a_fenced_partition_is_forgotten_a_failed_one_stays_taken() -> None:
    async def scenario() -> None:
        storage = Storage()
        storage.failures = {("t", 0): FencedEpochError("fenced", 9), ("t", 1): OSError(28, "full")}
        taken = TakenPartitions(storage.open)
        taken.take(("t", 0), 1)
        taken.take(("t", 1), 1)
        with pytest.raises(FencedEpochError):
            await taken.open(("t", 0))
        with pytest.raises(OSError):
            await taken.open(("t", 1))
        assert taken.epoch(("t", 0)) is None and taken.epoch(("t", 1)) == 1
        del storage.failures[("t", 1)]
        await taken.open(("t", 1))          # the next request opens it
        assert taken.epoch(("t", 1)) is None and storage.opened == [(("t", 1), 1)]
    asyncio.run(scenario())


def test_a_cleared_set_stops_its_opens() -> None:
    async def scenario() -> None:
        storage = Storage(delay=5)
        taken = TakenPartitions(storage.open)
        for index in range(10):
            taken.take(("t", index), 1)
        await asyncio.sleep(0.05)
        taken.clear()
        await asyncio.sleep(0.05)
        assert not taken and storage.opened == []
        await taken.open(("t", 0))          # not taken any more: nothing to do
    asyncio.run(scenario())


def test_the_background_opens_a_failed_partition_again_until_it_opens() -> None:
    async def scenario() -> None:
        storage = Storage()
        storage.failures = {("t", 0): OSError(110, "storage out of reach")}
        taken = TakenPartitions(storage.open)
        taken.take(("t", 0), 2)
        taken.take(("t", 1), 2)
        await asyncio.sleep(0.3)            # tried, failed; the other opened
        assert taken.epoch(("t", 0)) == 2 and storage.opened == [(("t", 1), 2)]
        del storage.failures[("t", 0)]      # storage back: opened with no request asking
        for _ in range(200):
            if not taken:
                break
            await asyncio.sleep(0.01)
        assert not taken and storage.opened == [(("t", 1), 2), (("t", 0), 2)]
        taken.clear()
    asyncio.run(scenario())
