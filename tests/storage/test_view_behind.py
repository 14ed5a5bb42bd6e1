"""A proxy's view of a partition (``bmq.readpath.partition_view``) whose reader falls back to an
older published state than the high watermark it has served (a refresh that read an older
state document): a consumer at an offset the view served is told "no data yet", never
OFFSET_OUT_OF_RANGE, which librdkafka answers by resetting to the earliest offset (seen in the
fault runs as a consumer going back to 0). Past everything, it is out of range, as on Kafka.
Likewise OffsetForLeaderEpoch never ends the last epoch below what the view served, and a
Fetch past the view asks the partition's owner before it answers out of range."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import FetchRequest
from bmq.protocol.messages.fetch_request import FetchPartition, FetchTopic
from bmq.readpath.cache import RecordCache
from bmq.readpath.fetch import answer_fetch
from bmq.readpath.partition_view import PartitionView
from bmq.storage import LocalStorage, LogConfig, LogReader, PartitionLog

from .batches import sized_batch
from .helpers import append

CONFIG = LogConfig(segment_bytes=1 << 20, retention_ms=-1, publish_interval_ms=0)


@pytest.fixture
def readers(tmp_path: Path) -> Iterator[tuple[LogReader, LogReader]]:
    """A partition's reader, and one of an older copy of it (the partition as published after
    3 of its 6 batches): a reader that fell back to an older state document."""
    newer, older = tmp_path / "newer", tmp_path / "older"
    log = PartitionLog.open(LocalStorage(str(newer)), "t", 0, CONFIG, epoch=1)
    for tag in range(3):
        append(log, sized_batch(300, tag))
    log.flush()
    shutil.copytree(newer, older)
    for tag in range(3, 6):
        append(log, sized_batch(300, tag))
    log.flush()
    current = PartitionLog.open_reader(LocalStorage(str(newer)), "t", 0, CONFIG)
    behind = PartitionLog.open_reader(LocalStorage(str(older)), "t", 0, CONFIG)
    try:
        yield current, behind
    finally:
        current.close()
        behind.close()
        log.close()


def test_a_view_never_calls_an_offset_it_served_out_of_range(
        readers: tuple[LogReader, LogReader]) -> None:
    reader, behind = readers
    assert behind.log_end_offset < reader.log_end_offset

    async def scenario() -> None:
        with ThreadPoolExecutor(2) as executor:
            view = PartitionView("t", 0, reader, RecordCache(1 << 20), executor, 1 << 10)
            served = view.high_watermark
            view.reader = behind                # its reader fell back to the older state
            # Not in the cache, past the reader, below what the view served: no data yet.
            for offset in (behind.log_end_offset + 1, served):
                assert await view.read(offset, 1 << 20) == b"", offset
            view.reader = reader                # caught up again: served as usual
            assert await view.read(behind.log_end_offset + 1, 1 << 20)
            with pytest.raises(KafkaError) as error:
                await view.read(served + 1, 1 << 20)
            assert error.value.code == ErrorCode.OFFSET_OUT_OF_RANGE

    asyncio.run(scenario())


def test_a_view_never_says_the_last_epoch_ended_before_what_it_served(
        readers: tuple[LogReader, LogReader]) -> None:
    """OffsetForLeaderEpoch from a view whose reader is behind it: the current epoch ends no
    earlier than the view's high watermark (librdkafka seeks a consumer back to an end offset
    below its position: seen in a kill run as a consumer reading a partition again from 0, with
    the group's committed offset at 744). An epoch older than the log's first still ends where
    the log starts, as on Kafka."""
    reader, behind = readers
    with ThreadPoolExecutor(1) as executor:
        view = PartitionView("t", 0, reader, RecordCache(1 << 20), executor, 1 << 10)
        served = view.high_watermark
        assert view.end_offset_for_epoch(1, 1) == (1, served)
        view.reader = behind
        # What the proxy answered before: the reader's own end, below what it served.
        assert behind.end_offset_for_epoch(1, 1) == (1, behind.high_watermark) \
            and behind.high_watermark < served
        assert view.end_offset_for_epoch(1, 1) == (1, served)
        assert view.end_offset_for_epoch(2, 2) == (2, served)    # a newer owner's
        assert view.end_offset_for_epoch(0, 1) == (0, 0)          # before the log


class _Owner:
    """A FetchServer whose one partition view is behind its owner: ``catch_up`` brings it up
    (as a proxy's round trip to the owner does) if the owner answers."""

    def __init__(self, view: PartitionView, current: LogReader, answers: bool) -> None:
        self._view, self._current, self._answers = view, current, answers
        self.asked = 0

    async def view(self, topic: str, index: int) -> PartitionView:
        return self._view

    def topic_by_id(self, topic_id: uuid.UUID) -> None:
        return None

    def epoch(self, topic: str, index: int) -> int:
        return 1

    async def catch_up(self, view: PartitionView) -> bool:
        self.asked += 1
        if self._answers:
            view.reader = self._current
            view.high_watermark = self._current.high_watermark
        return self._answers


def _fetch(offset: int) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=[FetchTopic(
                            topic="t", partitions=[FetchPartition(
                                partition=0, fetch_offset=offset,
                                partition_max_bytes=1 << 20)])])


@pytest.mark.parametrize("owner_answers", [True, False])
def test_a_fetch_past_a_view_asks_its_owner_before_out_of_range(
        readers: tuple[LogReader, LogReader], owner_answers: bool) -> None:
    """A consumer that read further on the owner itself (the proxy frozen meanwhile) fetches
    from a proxy whose view is behind: the proxy asks the owner and serves the records, or,
    the owner not answering, says NOT_LEADER_OR_FOLLOWER; never OFFSET_OUT_OF_RANGE, on which
    librdkafka reset the consumer to offset 0 (the pause run: 1,775 -> 0)."""
    current, behind = readers
    position = behind.log_end_offset + 1        # read elsewhere, past what the view knows

    async def scenario() -> None:
        with ThreadPoolExecutor(2) as executor:
            view = PartitionView("t", 0, behind, RecordCache(1 << 20), executor, 1 << 10)
            owner = _Owner(view, current, owner_answers)
            [topic] = (await answer_fetch(owner, _fetch(position))).responses
            [answer] = topic.partitions
            assert owner.asked == 1
            if owner_answers:
                assert answer.error_code == ErrorCode.NONE and answer.records
                assert answer.high_watermark == current.high_watermark
            else:
                assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            # Past the owner's end too: out of range, as on Kafka's leader.
            [topic] = (await answer_fetch(owner, _fetch(current.log_end_offset + 1))).responses
            assert topic.partitions[0].error_code == (
                ErrorCode.OFFSET_OUT_OF_RANGE if owner_answers
                else ErrorCode.NOT_LEADER_OR_FOLLOWER)

    asyncio.run(scenario())
