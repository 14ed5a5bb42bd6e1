"""The broker's state and the operations its API handlers share (topics, partitions, ids)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from concurrent.futures import Executor
from dataclasses import replace

from bmq.broker.fetch_views import BrokerFetchViews
from bmq.broker.group_config import group_config_defaults
from bmq.broker.leaders_cache import LeadersCache
from bmq.broker.membership import Membership
from bmq.broker.partition_loader import PartitionLoader
from bmq.broker.share_peers import ClusterStateAdmin, ShareStatePeers
from bmq.broker.topic_config import log_config, validate_topic_configs
from bmq.broker.txn_peers import TxnPeers
from bmq.broker.view_config import check_view
from bmq.config import Config
from bmq.coordinators.base import InternalLogCoordinator
from bmq.coordinators.groups import GroupCoordinator
from bmq.coordinators.share import SharePartitionManager
from bmq.coordinators.share.admin import LocalStateAdmin, StateAdmin
from bmq.coordinators.timers import TIMER_LOG_PREFIX, TimerService
from bmq.coordinators.transactions import TRANSACTION_TOPIC, TransactionCoordinator
from bmq.field_index.builder import IndexBuilder
from bmq.field_index.fields import Field, configured_fields, ever_indexed, keep_index_marker
from bmq.field_index.query import QueryService
from bmq.field_index.readers import PartitionLogs
from bmq.field_index.store import IndexStore
from bmq.metadata.broker_configs import BrokerConfigStore
from bmq.metadata.databus_streams import DatabusStreamStore
from bmq.metadata.group_configs import GroupConfigStore
from bmq.metadata.nodes import BrokerNode
from bmq.metadata.topics import OFFSETS_TOPIC, TopicInfo, check_topic_name
from bmq.metadata.views import is_view, lane_view, served_topic, views_of
from bmq.net.client import LinkSecurity
from bmq.net.memory import RequestMemory
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.storage import Storage
from bmq.storage.log import PartitionLog
from bmq.writepath.partitions import Partition, PartitionManager

log = logging.getLogger(__name__)

MAX_PARTITIONS = 10_000


class Broker:
    """Everything the handlers of one broker process (`bmq serve`, `bmq broker`) need to answer
    requests. Where its metadata comes from and which partitions it holds is its
    ``membership``'s business (``bmq.broker.membership``)."""

    def __init__(self, config: Config, log_storage: Storage, executor: Executor,
                 membership: Membership, link_security: LinkSecurity | None = None) -> None:
        """``link_security``: how this broker's links to other brokers log in (cluster mode)."""
        self.config = config
        # Memory for the requests its clients sent and it has not answered yet.
        self.request_memory = RequestMemory(config.queued_max_request_bytes)
        # BMQ's internal APIs are served on this listener only (links between nodes use it).
        self.inter_broker_listener = config.listener_list[0].name
        # Dynamic broker configs, once the role has read them (bmq/metadata/broker_configs.py).
        self.dynamic_configs: BrokerConfigStore | None = None
        self.group_configs: GroupConfigStore | None = None     # likewise
        self.databus_streams: DatabusStreamStore | None = None     # likewise
        self.membership = membership
        self.node = membership.node
        self.topics = membership.topics
        self.partitions = PartitionManager(log_storage, executor, membership.write_guard(),
                                           config.object_flush_interval_ms)
        self._executor = executor
        # Scheduled delivery: a timer log beside each partition of a topic with
        # bmq.delay.enable, opened, moved and deleted with the partition.
        self.timers = TimerService(self.partitions, log_storage, executor,
                                   self.allocate_producer_id)
        # Serialises topic create/delete/alter so concurrent admin requests cannot interleave.
        self._admin_lock = asyncio.Lock()
        self.loader = PartitionLoader(config, self.topics, self.partitions, self._admin_lock)
        self.leaders_cache = LeadersCache()
        self.groups = GroupCoordinator(self, executor)
        # The coordinators of internal logs, by internal topic: loaded as partitions are.
        self.coordinators: dict[str, InternalLogCoordinator] = {OFFSETS_TOPIC: self.groups}
        # Transactions: in cluster mode markers for partitions other brokers own, and the
        # verification of transactional produces, go to those brokers (``txn_peers``).
        self.txn_peers = TxnPeers(membership, self._txn_partition_for, link_security) \
            if membership.controller_assigns_partitions else None
        self.transactions = TransactionCoordinator(
            self, executor, self.allocate_producer_id, self.marker_written,
            None if self.txn_peers is None else self.txn_peers.write_markers)
        self.coordinators[TRANSACTION_TOPIC] = self.transactions
        # The read path in this process: every Fetch goes through its views and record cache.
        self.fetch_views = BrokerFetchViews(config, self.topics, self.partitions,
                                            self.served_partition, executor)
        self._group_config_defaults = group_config_defaults(config)
        # Share groups (KIP-932): membership here, share-partition state on its own log.
        self.share = SharePartitionManager(self, executor, self.fetch_views, self.group_config)
        self.coordinators[self.share.state_log.topic] = self.share.state_log
        # In a cluster a share-partition's leader and its state's coordinator may be two
        # brokers: the leader reads and writes the state there (``share_peers``).
        self.share_peers = ShareStatePeers(membership, self.share.state_log, link_security) \
            if membership.controller_assigns_partitions else None
        # How the group's coordinator alters, deletes offsets and deletes share groups.
        self.share_admin: StateAdmin = LocalStateAdmin(self.share)
        if self.share_peers is not None:
            self.share_peers.leader_state = self.share.lead_through(self.share_peers)
            self.share_admin = ClusterStateAdmin(self.share, self.share_peers)
        # Index Query (bmq.field_index): this broker indexes the partitions it owns, and answers
        # queries of any partition from the shared storage.
        index_store = IndexStore(log_storage)
        self.index_builder = IndexBuilder(index_store, self._owned_logs, self._index_fields,
                                          self._ever_indexed)
        self._query_logs = PartitionLogs(log_storage, self._owned_log)
        self.queries = QueryService(index_store, self.topics, self._query_logs)

    def _owned_logs(self) -> list[tuple[str, int, PartitionLog]]:
        return [(p.topic, p.index, p.log) for p in self.partitions.all()]

    def _owned_log(self, topic: str, index: int) -> PartitionLog | None:
        partition = self.partitions.get(topic, index)
        return None if partition is None else partition.log

    def _index_fields(self, topic: str) -> list[Field]:
        info = self.topics.get(topic)
        return [] if info is None or is_view(info.configs) else configured_fields(info.configs)

    def _ever_indexed(self, topic: str) -> bool:
        info = self.topics.get(topic)
        return info is not None and ever_indexed(info.configs)

    def _txn_partition_for(self, transactional_id: str) -> int:
        return self.transactions.partition_for(transactional_id)

    def marker_written(self, topic: str, index: int, producer_id: int, commit: bool) -> None:
        """A transaction marker is durable: offsets committed in it take effect (or not)."""
        if topic == OFFSETS_TOPIC:
            self.groups.complete_txn(index, producer_id, commit)

    @property
    def controller_assigns_partitions(self) -> bool:
        return self.membership.controller_assigns_partitions

    @property
    def cluster_id(self) -> str:
        return self.membership.cluster_id

    @property
    def nodes(self) -> list[BrokerNode]:
        return self.membership.nodes()

    @property
    def metadata_nodes(self) -> list[BrokerNode]:
        return self.membership.metadata_nodes()

    @property
    def controller_id(self) -> int:
        return self.membership.controller_id

    def can_acknowledge(self) -> bool:
        return self.membership.can_acknowledge()

    def partition_leader(self, topic: str, index: int) -> tuple[int, int] | None:
        """(leader node id, leader epoch) Metadata names for a partition, or None."""
        topic = served_topic(self.topics, topic)   # a view's partitions are its source's
        partition = self.partitions.get(topic, index)
        return self.membership.partition_leader(
            topic, index, None if partition is None else partition.leader_epoch)

    def leaders_token(self, topic: str) -> object:
        """What the leaders of ``topic``'s partitions depend on (``Membership.leaders_token``;
        a view's are its source's)."""
        return self.membership.leaders_token(served_topic(self.topics, topic))

    def partition_leader_of(self, topic_id: uuid.UUID, index: int) -> tuple[int, int]:
        """(leader node id, leader epoch) of a partition named by topic id, or (-1, -1)."""
        info = self.topics.by_id(topic_id)
        leader = None if info is None else self.partition_leader(info.name, index)
        return leader if leader is not None else (-1, -1)

    def group_config(self, group_id: str) -> dict[str, str]:
        """Every group config of ``group_id``: its own values, else the defaults."""
        own = self.group_configs.of(group_id) if self.group_configs is not None else {}
        return {**self._group_config_defaults, **own}

    def coordinator_node(self, group_id: str) -> BrokerNode | None:
        """The broker coordinating ``group_id``: the owner of its offsets partition."""
        return self.membership.owner_node(OFFSETS_TOPIC, self.groups.partition_for(group_id))

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self.membership.load)
        if not self.controller_assigns_partitions:
            await self.loader.open_internal()
        for coordinator in self.coordinators.values():
            await coordinator.start()
        self.share.start()
        self.index_builder.start()
        if not self.controller_assigns_partitions:
            self.loader.start()

    async def stop(self) -> None:
        await self.loader.stop()
        await asyncio.get_running_loop().run_in_executor(self._executor,
                                                         self.index_builder.stop)
        self.queries.close()
        self._query_logs.close()
        await self.share.stop()
        self.fetch_views.stop()
        for coordinator in self.coordinators.values():
            await coordinator.stop()
        for peers in (self.txn_peers, self.share_peers):
            if peers is not None:
                peers.close()
        await self.partitions.close_all()

    async def _open_partitions(self, topic: TopicInfo, indexes: range) -> None:
        """Make new partitions: all or none of them, so a topic (or its added partitions) is
        complete or absent, never half made."""
        if self.controller_assigns_partitions or is_view(topic.configs):
            return  # the controller assigns partitions, their owners open them; views have none
        config = log_config(self.config, topic.configs)
        opened = await asyncio.gather(
            *(self.partitions.open(topic.name, i, config) for i in indexes),
            return_exceptions=True)
        failed = [result for result in opened if isinstance(result, BaseException)]
        if not failed:
            return
        for index, result in zip(indexes, opened, strict=True):
            if not isinstance(result, BaseException):
                await self.partitions.close(topic.name, index, delete=True)
        if isinstance(failed[0], OSError):    # out of file descriptors, disk space, ...
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"could not open the partitions of {topic.name}: {failed[0]}"
                             ) from failed[0]
        raise failed[0]

    async def served_partition(self, topic: str, index: int) -> Partition:
        """``partition``, opened first if this broker has not opened it yet (see
        ``local_partition``)."""
        partition = await self.local_partition(topic, index)
        return self.partition(topic, index) if partition is None else partition

    async def local_partition(self, topic: str, index: int) -> Partition | None:
        """The partition if this broker serves it, opened first if it has not opened it yet
        (`bmq serve` opens its partitions in the background after it starts serving, see
        ``PartitionLoader``; a cluster broker those it was given, see ``membership.taken``);
        None if it does not (another broker owns it, or there is no such partition). Asking
        ``partitions`` instead takes a partition given and not opened for another broker's."""
        partition = self.partitions.get(topic, index)
        if partition is not None:
            return partition
        if not self.controller_assigns_partitions:
            await self.loader.open_now(topic, [index])
        else:
            await self.membership.open_taken(topic, index)
        return self.partitions.get(topic, index)

    def partition(self, topic: str, index: int) -> Partition:
        """The partition a client names, or UNKNOWN_TOPIC_OR_PARTITION."""
        partition = self.partitions.get(topic, index)
        if partition is None:
            info = self.topics.get(topic)
            if info is not None and 0 <= index < info.partitions and (
                    self.controller_assigns_partitions or not is_view(info.configs)):
                # Another broker owns it (or it is moving), or `bmq serve` has not opened it
                # yet (see served_partition): clients refresh their metadata and retry.
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
        if name.startswith(TIMER_LOG_PREFIX):
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"Topic names starting with {TIMER_LOG_PREFIX} are reserved "
                             "(timer logs of scheduled delivery)")
        if self.topics.get(name) is not None:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if is_view(configs) or lane_view(self.topics, name) is not None:
            num_partitions = check_view(self.topics, name, num_partitions, configs)
        if num_partitions == -1:
            num_partitions = self.config.num_partitions
        if not 0 < num_partitions <= MAX_PARTITIONS:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Number of partitions must be in 1..{MAX_PARTITIONS}.")
        if replication_factor == 0 or replication_factor < -1:
            # Any factor is met: the shared storage holds the durable copies and one broker
            # serves each partition (Metadata lists it as the only replica, in sync).
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "Replication factor must be larger than 0, or -1 to use the "
                             "default.")
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
            # In cluster mode each owner deletes its partitions once the topic is gone. Those
            # `bmq serve` has not opened yet are opened to be deleted as the others are.
            indexes = range(0 if self.controller_assigns_partitions else info.partitions)
            await self.loader.open_locked(info.name, indexes)
            # Its views and lanes go with it: they would show whatever topic took the name next.
            for gone in [*views_of(self.topics, info.name), info]:
                await asyncio.get_running_loop().run_in_executor(
                    self._executor, self.topics.remove, gone)
            for index in indexes:
                await self.partitions.close(info.name, index, delete=True)
            log.info("deleted topic %s", info.name)

    async def add_partitions(self, info: TopicInfo, count: int) -> None:
        async with self._admin_lock:
            if is_view(info.configs):
                raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                                 f"{info.name} is a view: it has its source's partitions")
            if count <= info.partitions:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                                 f"Topic currently has {info.partitions} partitions, "
                                 f"which is higher than or equal to the requested {count}.")
            if count > MAX_PARTITIONS:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"At most {MAX_PARTITIONS}.")
            await self._open_partitions(info, range(info.partitions, count))
            # A copy is saved: the registry's cached object may be refreshed from a ZooKeeper
            # read (made before this save) while the save waits for a worker thread.
            # Its views (and lanes) have its partitions: they grow with it.
            for grown in [info, *views_of(self.topics, info.name)]:
                await asyncio.get_running_loop().run_in_executor(
                    self._executor, self.topics.save, replace(grown, partitions=count))

    async def set_topic_configs(self, info: TopicInfo, configs: dict[str, str]) -> None:
        """Replace a topic's config overrides and apply them to its open logs."""
        configs = keep_index_marker(info.configs, configs)
        async with self._admin_lock:
            await asyncio.get_running_loop().run_in_executor(
                self._executor, self.topics.save, replace(info, configs=configs))
            new_config = log_config(self.config, configs)
            for index in range(info.partitions):
                partition = self.partitions.get(info.name, index)
                if partition is not None:
                    partition.log.config = new_config

    async def lane(self, name: str) -> TopicInfo | None:
        """The view of lane ``name`` (``TOPIC.lane.LANE``), made on first use; None if ``name``
        names no lane."""
        info = lane_view(self.topics, name)
        if info is None or self.topics.get(name) is not None:
            return self.topics.get(name)
        async with self._admin_lock:
            loop = asyncio.get_running_loop()
            try:
                await loop.run_in_executor(self._executor, self.topics.save, info)
                log.info("made the view of lane %s", name)
            except KafkaError as error:
                if error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    raise
                # Made through another broker meanwhile (the same id: derived alike).
                return await loop.run_in_executor(self._executor, self.topics.lookup, name)
            return info

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
            self._executor, self.membership.producer_ids.allocate)
