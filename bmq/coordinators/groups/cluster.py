"""The group coordinator of a cluster broker: it coordinates the groups of the
``__consumer_offsets`` partitions this broker owns, loading and unloading them as ownership moves
(``bmq.broker.membership.cluster`` calls ``load_partition``/``unload_partition``)."""

from __future__ import annotations

import asyncio

from bmq.coordinators.groups import GroupCoordinator
from bmq.metadata.topics import OFFSETS_TOPIC
from bmq.protocol.errors import ErrorCode, KafkaError


class ClusterGroupCoordinator(GroupCoordinator):
    async def start(self) -> None:
        """Make sure ``__consumer_offsets`` exists in ZooKeeper; load nothing yet."""
        broker = self._broker
        info = broker.topics.get(OFFSETS_TOPIC)
        if info is None:
            try:
                info = await broker.create_topic(OFFSETS_TOPIC, self.num_partitions, configs={
                    "retention.ms": "-1",
                    "retention.bytes": "-1",
                    "segment.bytes": str(self.config.offsets_topic_segment_bytes),
                    "max.message.bytes": str(2**31 - 1),
                })
            except KafkaError as error:
                if error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    raise
                info = broker.topics.get(OFFSETS_TOPIC)
                assert info is not None
        self.num_partitions = info.partitions
        self._active = True
        interval = self.config.offsets_retention_check_interval_ms
        if interval > 0:
            self._expiry_task = asyncio.get_running_loop().create_task(
                self._expire_forever(interval))
