"""The internal logs as declared once (bmq.metadata.topics.INTERNAL_LOGS): how each is compacted,
when it is created, and the configs it is created with, which must stay what they were."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bmq.broker.server import standalone_broker
from bmq.config import Config
from bmq.metadata.topics import (
    INTERNAL_TOPICS,
    OFFSETS_TOPIC,
    SHARE_STATE_TOPIC,
    SNAPSHOTTED_TOPICS,
    TRANSACTION_TOPIC,
    Compaction,
    InternalLog,
)

SEGMENT = 1 << 20


def kept_forever(segment_bytes: int) -> dict[str, str]:
    return {"retention.ms": "-1", "retention.bytes": "-1", "segment.bytes": str(segment_bytes),
            "max.message.bytes": str(2**31 - 1), "compression.type": "producer"}


def test_the_log_cleaner_skips_the_snapshotted_logs_only() -> None:
    assert {OFFSETS_TOPIC, TRANSACTION_TOPIC, SHARE_STATE_TOPIC} == INTERNAL_TOPICS
    assert {OFFSETS_TOPIC, SHARE_STATE_TOPIC} == SNAPSHOTTED_TOPICS


def test_a_log_the_cleaner_compacts_must_be_created_compact() -> None:
    with pytest.raises(ValueError, match="compact"):
        InternalLog("__x", Compaction.LOG_CLEANER, None, created_on_first_use=True)


def test_internal_topics_are_created_when_and_as_declared(tmp_path: Path) -> None:
    async def main() -> None:
        executor = ThreadPoolExecutor(2)
        config = Config(data_dir=str(tmp_path), offsets_topic_num_partitions=2,
                        offsets_topic_segment_bytes=SEGMENT,
                        transaction_state_log_num_partitions=2,
                        transaction_state_log_segment_bytes=2 * SEGMENT,
                        share_coordinator_state_topic_num_partitions=2,
                        share_coordinator_state_topic_segment_bytes=3 * SEGMENT)
        broker = standalone_broker(config, executor)
        await broker.start()
        try:
            # Only the offsets log is made at start; the others on first use.
            assert broker.topics.get(TRANSACTION_TOPIC) is None
            assert broker.topics.get(SHARE_STATE_TOPIC) is None
            await broker.transactions.ensure_started()
            assert await broker.share.state_log.ensure_started()
            created = {name: info.configs for name in INTERNAL_TOPICS
                       if (info := broker.topics.get(name)) is not None}
        finally:
            await broker.stop()
            executor.shutdown()
        assert created == {
            OFFSETS_TOPIC: {**kept_forever(SEGMENT), "cleanup.policy": "compact"},
            TRANSACTION_TOPIC: {**kept_forever(2 * SEGMENT), "cleanup.policy": "compact"},
            SHARE_STATE_TOPIC: kept_forever(3 * SEGMENT),
        }

    asyncio.run(main())
