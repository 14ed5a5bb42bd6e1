"""How a broker belongs to its cluster: where its metadata comes from, which nodes exist, who
leads each partition, and when it may acknowledge writes.

``Membership`` is the seam: the broker core (``bmq.broker.broker``) and its handlers ask it and
never look at how it is done. Two kinds:

``standalone``  `bmq serve`: one node, metadata in the data directory, every partition its own
``cluster``     `bmq broker`: ZooKeeper metadata, the partitions a controller assigns, the ack lease
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from bmq.metadata.nodes import BrokerNode
from bmq.metadata.producer_ids import ProducerIdAllocator
from bmq.metadata.topics import TopicRegistry


class Membership(ABC):
    #: The topics of the cluster (the source of truth behind it differs by kind).
    topics: TopicRegistry
    producer_ids: ProducerIdAllocator
    #: True when a controller assigns partitions to brokers (they open and close as it says);
    #: False when this broker holds every partition of every topic.
    controller_assigns_partitions: bool

    def __init__(self, node: BrokerNode) -> None:
        self.node = node
        self.cluster_id = ""

    @abstractmethod
    def load(self) -> None:
        """Blocking: read the cluster id and the topics (before the broker serves anything)."""

    @abstractmethod
    def nodes(self) -> list[BrokerNode]:
        """The live brokers, this one included."""

    def metadata_nodes(self) -> list[BrokerNode]:
        """The nodes Metadata lists: the brokers, and the proxies of a cluster that has them
        (every node must list the same ones: librdkafka forgets nodes a response leaves out)."""
        return self.nodes()

    @property
    @abstractmethod
    def controller_id(self) -> int:
        """The node clients are told is the controller (they send admin requests there)."""

    @abstractmethod
    def controller_description(self) -> str:
        """What runs the cluster's control, for operators (DescribeConfigs' bmq.controller of
        a broker): BMQ's controller is no Kafka node, so Metadata cannot name it."""

    @abstractmethod
    def partition_leader(self, topic: str, index: int, local_epoch: int | None
                         ) -> tuple[int, int] | None:
        """(leader node id, leader epoch) Metadata names for a partition, or None if it has no
        leader now. ``local_epoch`` is the epoch of this broker's open copy, if it has one."""

    @abstractmethod
    def leaders_token(self, topic: str) -> object:
        """What ``partition_leader`` of ``topic``'s partitions depends on besides the
        partition: while it compares equal, so do their leaders (Metadata keeps a topic's
        partition descriptions while it does, ``bmq.broker.leaders_cache``)."""

    @abstractmethod
    def owner_node(self, topic: str, index: int) -> BrokerNode | None:
        """The broker that owns a partition (where its coordinator runs), if any."""

    async def open_taken(self, topic: str, index: int) -> None:  # noqa: B027 - optional
        """Open a partition this broker took and has not opened yet (a cluster broker opens
        the partitions it is given on first use, ``cluster``); nothing if there is none."""

    def write_guard(self) -> Callable[[], bool] | None:
        """What a flush asks before writing (None: always allowed)."""
        return None

    def can_acknowledge(self) -> bool:
        """False while this broker may have lost its right to write (see ``cluster``)."""
        return True
