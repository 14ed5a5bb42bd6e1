"""The membership of `bmq serve`: a cluster of one, its metadata in the data directory's
``meta/`` storage (``bmq.metadata.local``)."""

from __future__ import annotations

from bmq.broker.membership import Membership
from bmq.metadata.local import LocalProducerIdAllocator, LocalTopicRegistry, load_cluster_id
from bmq.metadata.nodes import BrokerNode
from bmq.storage import Storage


class StandaloneMembership(Membership):
    controller_assigns_partitions = False

    def __init__(self, node: BrokerNode, meta_storage: Storage, producer_id_block_size: int
                 ) -> None:
        super().__init__(node)
        self._meta_storage = meta_storage
        self.topics = LocalTopicRegistry(meta_storage)
        self.producer_ids = LocalProducerIdAllocator(meta_storage, producer_id_block_size)

    def load(self) -> None:
        self.cluster_id = load_cluster_id(self._meta_storage)
        self.topics.load()

    def nodes(self) -> list[BrokerNode]:
        return [self.node]

    @property
    def controller_id(self) -> int:
        return self.node.node_id

    def controller_description(self) -> str:
        return "embedded: this bmq serve is its own controller"

    def partition_leader(self, topic: str, index: int, local_epoch: int | None
                         ) -> tuple[int, int] | None:
        # Every partition of a topic is this broker's, opened or not yet (bmq serve opens them
        # in the background after start-up, and any a client asks for at once).
        return self.node.node_id, local_epoch or 0

    def leaders_token(self, topic: str) -> object:
        # Always this node; the epoch of a standalone partition is 0, opened or not.
        return self.node.node_id

    def owner_node(self, topic: str, index: int) -> BrokerNode | None:
        return self.node
