"""A broker's partition views (``bmq.broker.fetch_views``) follow its logs' flushes a step
behind (longer while they read new data into the cache); ListOffsets must not: once a produce
is acknowledged, the end offset a ListOffsets answers includes it, as on Kafka's leader, for
read_committed too (librdkafka's default, answered from the view's last stable offset). Seen
from outside: `bench.storage_compare` read the end offsets right after its last
acknowledgement on HDFS and planned 179,118 of 200,000 records."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bmq.broker.fetch_views import BrokerFetchViews
from bmq.config import Config
from bmq.metadata.local import LocalTopicRegistry
from bmq.protocol.messages import ListOffsetsRequest
from bmq.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from bmq.protocol.records import read_header
from bmq.readpath.fetch import READ_COMMITTED
from bmq.readpath.list_offsets import answer_list_offsets
from bmq.storage import LocalStorage, LogConfig
from bmq.storage.offsets import LATEST
from bmq.writepath.partitions import Partition, PartitionManager, now_ms

from .batches import make_batch


def test_list_offsets_right_after_an_ack_includes_it(tmp_path: Path) -> None:
    async def end_offset(views: BrokerFetchViews, isolation: int) -> int:
        answer = await answer_list_offsets(views, ListOffsetsRequest(
            isolation_level=isolation, topics=[ListOffsetsTopic(name="t", partitions=[
                ListOffsetsPartition(partition_index=0, timestamp=LATEST)])]))
        partition = answer.topics[0].partitions[0]
        assert partition.error_code == 0
        return partition.offset

    async def scenario() -> None:
        with ThreadPoolExecutor(4) as pool:
            storage = LocalStorage(str(tmp_path))
            manager = PartitionManager(storage, pool)
            partition = await manager.open("t", 0, LogConfig())
            async def served(topic: str, index: int) -> Partition:
                return partition

            views = BrokerFetchViews(Config(), LocalTopicRegistry(storage), manager, served,
                                     pool)
            try:
                assert await end_offset(views, READ_COMMITTED) == 0   # the view is made
                for acked in range(1, 6):
                    batch = bytearray(make_batch([b"v%d" % acked]))
                    await partition.append_batch(batch, read_header(batch), now_ms())
                    for isolation in (READ_COMMITTED, 0):
                        assert await end_offset(views, isolation) == acked
            finally:
                views.stop()
                await manager.close_all()

    asyncio.run(scenario())
