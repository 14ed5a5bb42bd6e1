"""What every coordinator of an internal log is: state sharded over the partitions of one
internal topic (``__consumer_offsets`` for groups; transactions, share groups and timers next),
kept by whichever broker owns each partition.

The broker that opens a partition of the topic loads that shard (replays the partition's log);
when it loses the partition it unloads the shard; requests for a shard it does not hold are
answered NOT_COORDINATOR so that clients look for the new owner. Writes are appended to the
partition and answered once durable (``Partition.durable``), like acks=all produces.

A broker runs one coordinator per internal topic and drives them all the same way: its
membership calls ``load_partition`` and ``unload_partition`` as ownership moves (a standalone
broker owns every partition and loads them all at start).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Protocol

from bmq.config import Config
from bmq.metadata.topics import TopicInfo, TopicRegistry
from bmq.writepath.partitions import Partition, PartitionManager


class CoordinatorHost(Protocol):
    """What a coordinator needs of the broker that runs it."""

    config: Config
    topics: TopicRegistry
    partitions: PartitionManager

    @property
    def controller_assigns_partitions(self) -> bool:
        """True: shards are loaded as partitions are assigned; False: all of them at start."""

    async def served_partition(self, topic: str, index: int) -> Partition:
        """A partition this broker serves, opened first if it was not yet; raises the Kafka
        error a client would get (NOT_LEADER_OR_FOLLOWER if another broker owns it)."""

    async def local_partition(self, topic: str, index: int) -> Partition | None:
        """``served_partition``, or None if this broker does not serve it."""

    async def create_topic(self, name: str, num_partitions: int = -1,
                           replication_factor: int = -1,
                           configs: Mapping[str, str | None] | None = None) -> TopicInfo: ...


class InternalLogCoordinator(ABC):
    """A coordinator sharded over the partitions of the internal topic ``topic``."""

    #: The internal topic whose partitions hold this coordinator's log.
    topic: str

    @abstractmethod
    async def start(self) -> None:
        """Make sure the internal topic exists; load every shard if no controller assigns them."""

    @abstractmethod
    async def stop(self) -> None:
        """Unload every shard; answer what waits with NOT_COORDINATOR."""

    @abstractmethod
    async def load_partition(self, index: int) -> None:
        """This broker now owns partition ``index`` (open): replay it and serve its shard."""

    @abstractmethod
    def unload_partition(self, index: int) -> None:
        """This broker is losing partition ``index``: stop serving its shard at once."""

    @abstractmethod
    def partition_for(self, key: str) -> int:
        """The partition (shard) that holds ``key`` (a group id, a transactional id, ...)."""
