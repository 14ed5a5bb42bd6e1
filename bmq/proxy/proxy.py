"""The proxy role's state: the cluster view, the partitions it serves, the record cache, its
own links to brokers (client connections forward their requests on links of their own), and
one watcher per broker that hears of new durable data.

A watcher keeps one ``BmqWatchPartitions`` request parked at its broker, listing the partitions
this proxy has views of that the broker owns, with the high watermark each view knows; the broker
answers as soon as one of them grows. When the set of watched partitions changes (a new
partition is read, or ownership moved), the parked request is abandoned by closing its link and
a new one is sent at once.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import weakref
from concurrent.futures import Executor

from bmq.config import Config
from bmq.field_index.query import QueryService
from bmq.field_index.readers import PartitionLogs
from bmq.field_index.store import IndexStore
from bmq.metadata.nodes import BrokerNode
from bmq.metadata.routing import proxy_for
from bmq.metadata.topics import TopicInfo, TopicPartition
from bmq.net.client import BrokerLink, LinkError, LinkPool, LinkSecurity
from bmq.net.memory import RequestMemory
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import BmqWatchPartitionsRequest
from bmq.protocol.messages.bmq_watch_partitions_request import WatchPartition, WatchTopic
from bmq.proxy.cluster_view import ClusterView
from bmq.proxy.share import ShareSessionRelay
from bmq.readpath.cache import RecordCache
from bmq.readpath.partition_view import PartitionView
from bmq.readpath.views import FilteredView, ViewResolver
from bmq.storage import Storage
from bmq.storage.log import LogReader, PartitionLog

log = logging.getLogger(__name__)

WATCH_MAX_WAIT_MS = 5_000
WATCH_GRACE_S = 5.0     # past the broker's longest wait, a watch's answer is taken as lost
RETRY_S = 0.2
BROKER_WAIT_S = 10.0


class Proxy:
    def __init__(self, config: Config, storage: Storage, executor: Executor,
                 cluster: ClusterView, link_security: LinkSecurity | None = None) -> None:
        """``link_security``: how links to the brokers' inter-broker listener log in."""
        self.config = config
        # Memory for the requests its clients sent and it has not answered yet.
        self.request_memory = RequestMemory(config.queued_max_request_bytes)
        self.link_security = link_security
        self.storage = storage
        self.cluster = cluster
        self._executor = executor
        self.cache = RecordCache(config.proxy_cache_bytes)
        self.links = LinkPool(security=link_security)
        # Every client connection's own links (ProxyService), to fail what waits on a broker
        # that left the cluster (see _cluster_changed).
        self.client_links: weakref.WeakSet[LinkPool] = weakref.WeakSet()
        self._views: dict[TopicPartition, PartitionView] = {}
        self._opening: dict[TopicPartition, asyncio.Task[PartitionView]] = {}
        self.views = ViewResolver(cluster.topics, self.cache)
        self._watchers: dict[int, BrokerWatcher] = {}
        # Share consumers' sessions, each split over the partitions' owners (bmq.proxy.share).
        self.share_sessions = ShareSessionRelay()
        # Index Query (bmq.field_index): answered from the shared storage, as any broker does.
        self._query_logs = PartitionLogs(storage)
        self.queries = QueryService(IndexStore(storage), cluster.topics, self._query_logs)

    @property
    def node(self) -> BrokerNode:
        assert self.cluster.me is not None
        return self.cluster.me

    async def start(self) -> None:
        self.cluster.listeners.append(self._cluster_changed)   # called on each read too
        await self.cluster.start()

    async def stop(self) -> None:
        for watcher in self._watchers.values():
            watcher.stop()
        self.links.close()
        for view in self._views.values():
            view.close()
        self.queries.close()
        self._query_logs.close()
        await self.cluster.stop()

    # ------------------------------------------------------------------ routing
    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self.cluster.topics.by_id(topic_id)

    def epoch(self, topic: str, index: int) -> int:
        return self.cluster.epoch(self.views.source(topic), index)

    def leader(self, topic: str, index: int) -> int:
        """The proxy clients are sent to for this partition (a view's: its source's, whose
        batches that proxy has cached)."""
        return proxy_for(self.views.source(topic), index, self.cluster.proxies)

    def owner_node(self, topic: str, index: int) -> BrokerNode:
        owner = self.cluster.owner(topic, index)
        if owner is None:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "the partition has no owner now")
        return owner.node

    async def any_broker(self) -> BrokerNode:
        """The lowest live broker (the one Metadata names as controller); waits a moment for
        one to register (a proxy may start before any broker)."""
        return (await self.live_brokers())[0]

    async def live_brokers(self) -> list[BrokerNode]:
        """The registered brokers, lowest id first; waits a moment for one to register."""
        deadline = asyncio.get_running_loop().time() + BROKER_WAIT_S
        while not self.cluster.brokers:
            if asyncio.get_running_loop().time() > deadline:
                raise LinkError("no broker is live")
            await asyncio.sleep(RETRY_S / 4)
        brokers = self.cluster.brokers
        return [brokers[broker_id] for broker_id in sorted(brokers)]

    # ------------------------------------------------------------------ partition views
    async def view(self, topic: str, index: int) -> PartitionView | FilteredView:
        """A partition as fetches see it (a view's, a lane's or a trunk's filtered)."""
        return await self.views.view(topic, index, self._source_view)

    async def _source_view(self, topic: str, index: int) -> PartitionView:
        """The view of a partition, opened (one storage listing and read) on first use."""
        key = (topic, index)
        view = self._views.get(key)
        if view is not None:
            return view
        info = self.cluster.topics.get(topic)
        if info is None or not 0 <= index < info.partitions:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        task = self._opening.get(key)
        if task is None:
            task = self._opening[key] = asyncio.get_running_loop().create_task(
                self._open(topic, index))
        try:
            return await asyncio.shield(task)
        finally:
            self._opening.pop(key, None)

    async def _open(self, topic: str, index: int) -> PartitionView:
        reader: LogReader = await asyncio.get_running_loop().run_in_executor(
            self._executor, PartitionLog.open_reader, self.storage, topic, index)
        view = PartitionView(topic, index, reader, self.cache, self._executor,
                             self.config.proxy_read_ahead_bytes)
        await self.catch_up(view)
        self._views[(topic, index)] = view
        self._cluster_changed()   # watch it from now on
        return view

    async def catch_up(self, view: PartitionView) -> bool:
        """Bring a view to the owner's high watermark now: a new view (storage shows the state
        the owner published last, up to a publish interval old), or one a ListOffsets reads
        (a producer that was just acknowledged must find its records below the end offset, as
        on Kafka's leader, not a notice later). Asks the owner once, without waiting; False if
        it could not (no owner known, or the owner did not answer)."""
        owner = self.cluster.owner(view.topic, view.index)
        if owner is None:
            return False
        request = BmqWatchPartitionsRequest(max_wait_ms=0, topics=[WatchTopic(
            name=view.topic, partitions=[WatchPartition(partition_index=view.index)])])
        try:
            response = await self.links.get(owner.node.host, owner.node.port).request(request, 0)
        except (LinkError, OSError) as error:
            log.info("%s-%d: owner %d not reachable (%s): serving what storage shows",
                     view.topic, view.index, owner.node.node_id, error)
            return False
        caught_up = False
        for topic in response.topics:
            for changed in topic.partitions:
                if changed.error_code == ErrorCode.NONE:
                    await view.apply(changed.tail)
                    caught_up = True
        return caught_up

    def _cluster_changed(self) -> None:
        """Follow ZooKeeper: fail requests waiting on brokers that left the cluster, drop views
        of deleted topics, point watchers at current owners.

        A broker that left while frozen (SIGSTOP past its session timeout) never answers what
        was forwarded to it; closing the links to it answers those produces
        NOT_LEADER_OR_FOLLOWER at once, so the client asks for metadata and retries on the
        partitions' new owners (an idempotent producer's retry of a batch the frozen broker
        had made durable is recognised as a duplicate by the new owner)."""
        live = {(node.host, node.port) for node in self.cluster.brokers.values()}
        for pool in (self.links, *self.client_links):
            pool.close_except(live)
        by_broker: dict[int, list[PartitionView]] = {}
        for key, view in list(self._views.items()):
            info = self.cluster.topics.get(view.topic)
            if info is None or view.index >= info.partitions:
                del self._views[key]
                view.close()
                continue
            owner = self.cluster.owner(view.topic, view.index)
            if owner is not None:
                by_broker.setdefault(owner.node.node_id, []).append(view)
        for broker_id, watcher in list(self._watchers.items()):
            if broker_id not in by_broker or self.cluster.brokers.get(broker_id) != watcher.node:
                watcher.stop()
                del self._watchers[broker_id]
        for broker_id, views in by_broker.items():
            if broker_id not in self._watchers:
                self._watchers[broker_id] = BrokerWatcher(self.cluster.brokers[broker_id],
                                                              self.link_security)
            self._watchers[broker_id].watch(views)


class BrokerWatcher:
    """Keeps a BmqWatchPartitions request parked at one broker and applies its answers."""

    def __init__(self, node: BrokerNode, link_security: LinkSecurity | None) -> None:
        self.node = node
        self._link_security = link_security
        self._views: list[PartitionView] = []
        self._link: BrokerLink | None = None
        self._task: asyncio.Task[None] | None = None
        self._changed = False
        # The high watermark the broker last reported per partition: asking with it (not the
        # view's, which may lag a moment) makes the broker answer only when it has news.
        self._reported: dict[TopicPartition, int] = {}

    def watch(self, views: list[PartitionView]) -> None:
        if {v.key for v in views} != {v.key for v in self._views}:
            self._views = views
            self._changed = True
            if self._link is not None:
                self._link.close()       # abandon the parked request: re-send with the new set
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._link is not None:
            self._link.close()

    def _request(self) -> BmqWatchPartitionsRequest:
        topics: dict[str, list[WatchPartition]] = {}
        for view in self._views:
            reader = view.reader
            topics.setdefault(view.topic, []).append(WatchPartition(
                partition_index=view.index,
                known_high_watermark=max(view.high_watermark, self._reported.get(view.key, -1)),
                known_rewrites=reader.owner_rewrites if isinstance(reader, LogReader) else -1))
        return BmqWatchPartitionsRequest(
            max_wait_ms=WATCH_MAX_WAIT_MS,
            topics=[WatchTopic(name=name, partitions=parts) for name, parts in topics.items()])

    async def _run(self) -> None:
        while True:
            self._changed = False
            views = {v.key: v for v in self._views}
            if not views:
                await asyncio.sleep(RETRY_S)
                continue
            if self._link is None or self._link.closed:
                self._link = BrokerLink(self.node.host, self.node.port, "bmq-proxy-watch",
                                        self._link_security)
            try:
                response = await asyncio.wait_for(self._link.request(self._request(), 0),
                                                  WATCH_MAX_WAIT_MS / 1000 + WATCH_GRACE_S)
            except TimeoutError:
                # The answer was lost on a connection that stays open (a network fault
                # dropped the broker's packets): ask again on a new one, or the views of its
                # partitions would stay where they are, and consumers with them.
                log.info("watching broker %d: no answer in %.0f s (asking again)",
                         self.node.node_id, WATCH_MAX_WAIT_MS / 1000 + WATCH_GRACE_S)
                self._link.close()
                continue
            except (LinkError, OSError) as error:
                if not self._changed:
                    log.info("watching broker %d: %s (retrying)", self.node.node_id, error)
                    await asyncio.sleep(RETRY_S)
                continue
            for topic in response.topics:
                for changed in topic.partitions:
                    view = views.get((topic.name, changed.partition_index))
                    if view is None or view.closed:
                        continue
                    if changed.error_code != ErrorCode.NONE:
                        # Moved or moving: ZooKeeper tells us the new owner; until then wait.
                        await asyncio.sleep(RETRY_S)
                        continue
                    try:
                        await view.apply(changed.tail)
                    except Exception as error:
                        # The view did not take the tail (storage unreachable or slow: its
                        # client's errors are not all OSErrors): ask again with what it has, so
                        # the broker answers at once (asked with the reported high watermark it
                        # would wait for news, and a partition written no more would keep its
                        # last records from consumers); pace the retries. Whatever the error,
                        # this watcher goes on: if it ended, the views of every partition of
                        # the broker would stop where they are, and their consumers with them.
                        log.warning("%s-%d: new data not read yet: %r (retrying)", view.topic,
                                    view.index, error)
                        await asyncio.sleep(RETRY_S)
                    else:
                        self._reported[view.key] = changed.high_watermark
