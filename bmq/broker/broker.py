"""The broker's state and the operations its API handlers share (topics, partitions, ids)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bmq.broker.groups import GroupCoordinator
from bmq.broker.metadata import (
    OFFSETS_TOPIC,
    ProducerIdAllocator,
    TopicInfo,
    TopicRegistry,
    check_topic_name,
    load_cluster_id,
)
from bmq.broker.partitions import Partition, PartitionManager
from bmq.broker.topic_config import log_config, validate_topic_configs
from bmq.config import BrokerConfig
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.proxy.local import LocalProxy
from bmq.proxy.routing import proxy_for
from bmq.storage import Storage

if TYPE_CHECKING:
    from bmq.cluster.node import ClusterNode
    from bmq.cluster.zk import ZkProducerIdAllocator

log = logging.getLogger(__name__)

MAX_PARTITIONS = 10_000


@dataclass(frozen=True, slots=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None


class Broker:
    """Everything the handlers of one `bmq serve` process need to answer requests.

    In cluster mode (``cluster`` given, `bmq broker`) topics, producer ids and the cluster id
    come from ZooKeeper, and this broker serves only the partitions the controller gave it.
    """

    def __init__(self, config: BrokerConfig, log_storage: Storage, meta_storage: Storage | None,
                 executor: Executor, cluster: ClusterNode | None = None) -> None:
        self.config = config
        self.cluster = cluster
        self.topics: TopicRegistry
        self._producer_ids: ProducerIdAllocator | ZkProducerIdAllocator
        if cluster is not None:
            self.topics = cluster.topics
            self._producer_ids = cluster.producer_ids
            self.partitions = PartitionManager(log_storage, executor, cluster.can_acknowledge,
                                               config.object_flush_interval_ms)
        else:
            assert meta_storage is not None
            self.topics = TopicRegistry(meta_storage)
            self._producer_ids = ProducerIdAllocator(meta_storage, config.producer_id_block_size)
            self.partitions = PartitionManager(log_storage, executor, None,
                                               config.object_flush_interval_ms)
        self.cluster_id = ""
        self._meta_storage = meta_storage
        self._executor = executor
        host, port = config.advertised
        self.node = BrokerNode(config.node_id, host, port)
        # Serialises topic create/delete/alter so concurrent admin requests cannot interleave.
        self._admin_lock = asyncio.Lock()
        if cluster is not None:
            from bmq.cluster.groups import ClusterGroupCoordinator

            self.groups: GroupCoordinator = ClusterGroupCoordinator(self, executor)
        else:
            self.groups = GroupCoordinator(self, executor)
        # The proxy role in this process: every Fetch goes through its views and record cache.
        self.fetch_views = LocalProxy(self, executor)

    @property
    def nodes(self) -> list[BrokerNode]:
        # A cluster broker answers requests a moment before it follows ZooKeeper: itself then.
        if self.cluster is not None and self.cluster.broker is not None:
            return self.cluster.nodes()
        return [self.node]

    @property
    def controller_id(self) -> int:
        if self.cluster is not None and self.cluster.broker is not None:
            return self.cluster.controller_id
        return self.node.node_id

    def can_acknowledge(self) -> bool:
        """False once a cluster broker's ack lease ran out (see bmq.cluster.lease)."""
        return self.cluster is None or self.cluster.can_acknowledge()

    @property
    def metadata_nodes(self) -> list[BrokerNode]:
        """The nodes Metadata lists: the brokers, and the proxies of a cluster that has them
        (every node must list the same ones: librdkafka forgets nodes a response leaves out)."""
        if self.cluster is not None and self.cluster.proxies:
            return self.nodes + [self.cluster.proxies[i] for i in sorted(self.cluster.proxies)]
        return self.nodes

    def partition_leader(self, topic: str, index: int) -> tuple[int, int] | None:
        """(leader node id, leader epoch) Metadata names for a partition, or None if it has no
        leader now. In a cluster with proxies that is the proxy routing picks, as the proxies
        themselves answer (bmq.proxy.routing): clients produce and fetch through proxies."""
        if self.cluster is not None:
            owner = self.cluster.leader(topic, index)
            if self.cluster.proxies and owner is not None:
                return proxy_for(topic, index, self.cluster.proxies), owner[1]
            return owner
        partition = self.partitions.get(topic, index)
        return None if partition is None else (self.node.node_id, partition.leader_epoch)

    def coordinator_node(self, group_id: str) -> BrokerNode | None:
        """The broker coordinating ``group_id``: the owner of its offsets partition."""
        if self.cluster is None:
            return self.node
        leader = self.cluster.leader(OFFSETS_TOPIC, self.groups.partition_for(group_id))
        return None if leader is None else self.cluster.node(leader[0])

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self.cluster is not None:
            self.cluster_id = self.cluster.cluster_id
            await self.groups.start()
            return
        assert self._meta_storage is not None
        self.cluster_id = await loop.run_in_executor(
            self._executor, load_cluster_id, self._meta_storage)
        await loop.run_in_executor(self._executor, self.topics.load)
        for topic in self.topics.all():
            await self._open_partitions(topic, range(topic.partitions))
        log.info("loaded %d topics", len(self.topics.all()))
        await self.groups.start()

    async def stop(self) -> None:
        self.fetch_views.stop()
        await self.groups.stop()
        await self.partitions.close_all()

    async def _open_partitions(self, topic: TopicInfo, indexes: range) -> None:
        if self.cluster is not None:
            return  # the controller assigns partitions; their owners open them
        config = log_config(self.config, topic.configs)
        await asyncio.gather(*(self.partitions.open(topic.name, i, config) for i in indexes))

    def partition(self, topic: str, index: int) -> Partition:
        """The partition a client names, or UNKNOWN_TOPIC_OR_PARTITION."""
        partition = self.partitions.get(topic, index)
        if partition is None:
            info = self.topics.get(topic)
            if self.cluster is not None and info is not None and 0 <= index < info.partitions:
                # Another broker owns it (or it is moving): clients refresh their metadata.
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return partition

    async def lookup_topic(self, name: str) -> TopicInfo | None:
        """An existing topic for an admin request, from the source of truth (see lookup)."""
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, self.topics.lookup, name)

    def topic_name(self, name: str, topic_id: uuid.UUID) -> str:
        """Resolve a topic named either way (newer APIs send ids instead of names)."""
        if topic_id.int:
            info = self.topics.by_id(topic_id)
            if info is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID)
            return info.name
        return name

    # Topic administration -------------------------------------------------------------------

    def check_new_topic(self, name: str, num_partitions: int, replication_factor: int,
                        configs: Mapping[str, str | None]) -> tuple[int, dict[str, str]]:
        """Validate a CreateTopics entry; returns the partition count and configs to use."""
        check_topic_name(name)
        if self.topics.get(name) is not None:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if num_partitions == -1:
            num_partitions = self.config.num_partitions
        if not 0 < num_partitions <= MAX_PARTITIONS:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Number of partitions must be in 1..{MAX_PARTITIONS}.")
        if replication_factor not in (-1, 1):
            # Storage replicates the data; each partition has exactly one logical replica.
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "Replication factor must be 1 (or -1): storage replicates data.")
        return num_partitions, validate_topic_configs(configs)

    async def create_topic(self, name: str, num_partitions: int = -1,
                           replication_factor: int = -1,
                           configs: Mapping[str, str | None] | None = None) -> TopicInfo:
        async with self._admin_lock:
            count, valid = self.check_new_topic(name, num_partitions, replication_factor,
                                                configs or {})
            info = TopicInfo(name, uuid.uuid4(), count, valid)
            await self._open_partitions(info, range(count))
            await asyncio.get_running_loop().run_in_executor(
                self._executor, self.topics.save, info)
            log.info("created topic %s with %d partitions", name, count)
            return info

    async def delete_topic(self, info: TopicInfo) -> None:
        async with self._admin_lock:
            await asyncio.get_running_loop().run_in_executor(
                self._executor, self.topics.remove, info)
            # In cluster mode each owner deletes its partitions once the topic is gone.
            for index in range(0 if self.cluster else info.partitions):
                await self.partitions.close(info.name, index, delete=True)
            log.info("deleted topic %s", info.name)

    async def add_partitions(self, info: TopicInfo, count: int) -> None:
        async with self._admin_lock:
            if count <= info.partitions:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                                 f"Topic currently has {info.partitions} partitions, "
                                 f"which is higher than or equal to the requested {count}.")
            if count > MAX_PARTITIONS:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"At most {MAX_PARTITIONS}.")
            await self._open_partitions(info, range(info.partitions, count))
            info.partitions = count
            await asyncio.get_running_loop().run_in_executor(
                self._executor, self.topics.save, info)

    async def set_topic_configs(self, info: TopicInfo, configs: dict[str, str]) -> None:
        """Replace a topic's config overrides and apply them to its open logs."""
        async with self._admin_lock:
            info.configs = configs
            await asyncio.get_running_loop().run_in_executor(
                self._executor, self.topics.save, info)
            new_config = log_config(self.config, configs)
            for index in range(info.partitions):
                partition = self.partitions.get(info.name, index)
                if partition is not None:
                    partition.log.config = new_config

    async def auto_create(self, name: str) -> TopicInfo:
        """Create a topic a client asked for by name, as auto.create.topics.enable does."""
        existing = self.topics.get(name)
        if existing is not None:
            return existing
        try:
            return await self.create_topic(name)
        except KafkaError as error:
            if error.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                info = self.topics.get(name)
                assert info is not None
                return info
            raise

    async def allocate_producer_id(self) -> int:
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, self._producer_ids.allocate)
