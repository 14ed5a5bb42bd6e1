"""How a cluster broker takes a partition and gives it up: its log opened for the leader epoch
the controller assigned (at once, or on first use: ``taken``), its coordinator loaded or
unloaded, its log closed, and the states reported meanwhile (``cluster`` decides when)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from bmq.broker.membership.moves import MoveLog
from bmq.broker.topic_config import log_config
from bmq.config import Config
from bmq.coordinators.base import InternalLogCoordinator
from bmq.metadata.topics import TopicPartition, TopicRegistry
from bmq.metadata.zookeeper.layout import DRAINING, RECOVERING, RELEASED, WRITABLE
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.writepath.partitions import PartitionManager

log = logging.getLogger("bmq.broker.membership.cluster")


class Handover:
    def __init__(self, config: Config, topics: TopicRegistry, partitions: PartitionManager,
                 coordinators: Mapping[str, InternalLogCoordinator], moves: MoveLog,
                 report: Callable[[TopicPartition, int, str], None]) -> None:
        self._config = config
        self._topics = topics
        self._partitions = partitions
        self._coordinators = coordinators
        self._moves = moves
        self._report = report

    def opened_on_first_use(self, topic: str) -> bool:
        """Whether a partition of ``topic`` is taken without opening it (``taken``): not
        those of internal topics (their coordinators load from them) nor of topics with
        scheduled delivery (their timers deliver unasked)."""
        info = self._topics.get(topic)
        return info is not None and not topic.startswith("__") \
            and topic not in self._coordinators \
            and not log_config(self._config, info.configs).delay_enable

    async def open(self, tp: TopicPartition, epoch: int, deleted: bool = False) -> None:
        """Open the partition's log as the owner of ``epoch`` (raises ``FencedEpochError``
        if storage has seen a higher one); ``deleted``: its topic was deleted, and it is
        opened to be deleted with it (with the default configs)."""
        topic, index = tp
        info = self._topics.get(topic)
        if info is None and not deleted:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic} is unknown")
        configs = {} if info is None else info.configs
        started = time.monotonic()
        await self._partitions.open(topic, index, log_config(self._config, configs),
                                    leader_epoch=epoch)
        self._moves.taken(topic, index, epoch, (time.monotonic() - started) * 1000)

    async def acquire(self, tp: TopicPartition, epoch: int) -> None:
        """Open it now, with its coordinator, then report it writable."""
        self._report(tp, epoch, RECOVERING)
        await self.open(tp, epoch)
        coordinator = self._coordinators.get(tp[0])
        if coordinator is not None:
            await coordinator.load_partition(tp[1])
        self._report(tp, epoch, WRITABLE)

    async def release(self, tp: TopicPartition, epoch: int, delete: bool) -> None:
        topic, index = tp
        self._report(tp, epoch, DRAINING)
        coordinator = self._coordinators.get(topic)
        if coordinator is not None:
            coordinator.unload_partition(index)
        try:
            await self._partitions.close(topic, index, delete=delete)
        except Exception as error:
            log.warning("closing %s-%d: %s", topic, index, error)
        self._report(tp, epoch, RELEASED)
        self._moves.released(topic, index, epoch)
