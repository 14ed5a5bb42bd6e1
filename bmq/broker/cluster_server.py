"""`bmq broker`: a stateless broker of a cluster (ZooKeeper metadata, shared storage).

Start: connect to ZooKeeper, build the broker on the shared storage, listen, register (from then
on the controller may give it partitions). SIGTERM: drain (the controller moves every partition
away, each released only after its last flush), close, leave ZooKeeper, exit 0.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bmq import metrics
from bmq.broker.broker import Broker
from bmq.broker.handlers import HANDLERS
from bmq.broker.membership.cluster import ClusterMembership
from bmq.broker.server import serve_metrics_of
from bmq.broker.service import broker_connection
from bmq.cleaner import CleanerService
from bmq.config import Config
from bmq.lifecycle import run_until_signalled
from bmq.metadata.broker_configs import BrokerConfigStore
from bmq.metadata.databus_streams import DatabusStreamStore
from bmq.metadata.group_configs import GroupConfigStore
from bmq.metadata.nodes import BrokerNode
from bmq.metadata.topics import OFFSETS_TOPIC
from bmq.metadata.zookeeper.documents import ZkDocuments
from bmq.net.api import preload
from bmq.net.listening import Listening
from bmq.security.loading import load_security_metadata, role_security
from bmq.storage.factory import check_backend, open_log_storage, unusable_storage

log = logging.getLogger(__name__)

WORKER_THREADS = 16


class ClusterBrokerServer:
    def __init__(self, config: Config, storage_options: dict[str, str] | None = None
                 ) -> None:
        self.config = config
        self._executor = ThreadPoolExecutor(WORKER_THREADS, thread_name_prefix="bmq-io")
        # Opened once ZooKeeper answers (a local directory is created when opened), but a
        # missing package (s3, hdfs) stops us now.
        check_backend(config.storage)
        self._storage_options = storage_options
        host, port = config.advertised
        node = BrokerNode(config.node_id, host, port, endpoints=config.advertised_endpoints)
        self.membership = ClusterMembership(config, node, self._executor)
        self.broker: Broker | None = None
        # Links to other nodes log in to their inter-broker listener.
        self.security, self._link_security = role_security(config, links=True)
        self._listening = Listening(config.listener_list, self.security.tls_contexts, sasl=True)
        self._maintenance: asyncio.Task[None] | None = None
        self._metrics_server: Any = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        # Ports first, ZooKeeper next: a port in use or an unreachable ZooKeeper stops us
        # before we create anything on storage or the controller gives us anything.
        self._listening.bind()
        if self.config.metrics_port:
            self._metrics_server = serve_metrics_of(self.config, lambda: self.broker)
        await loop.run_in_executor(self._executor, self.membership.connect)
        assert self.membership.zk is not None
        documents = ZkDocuments(self.membership.zk, self.membership.paths)
        await loop.run_in_executor(
            self._executor, load_security_metadata, self.security, self.config, documents)
        try:
            storage = open_log_storage(self.config.storage, self._storage_options)
            await loop.run_in_executor(self._executor, storage.makedirs, "")
            # A real request before we register: on an object store the first one also sets up
            # the client (session, connection pool; 0.3-0.8 s on SeaweedFS here), which would
            # otherwise delay the first partition the controller gives us.
            await loop.run_in_executor(self._executor, storage.exists, OFFSETS_TOPIC)
        except OSError as error:
            raise unusable_storage(self.config.storage, error) from error
        broker = self.broker = Broker(self.config, storage, self._executor, self.membership,
                                     self._link_security)
        broker.dynamic_configs = await loop.run_in_executor(
            self._executor, BrokerConfigStore(documents).follow)
        broker.group_configs = await loop.run_in_executor(
            self._executor, GroupConfigStore(documents).follow)
        broker.databus_streams = await loop.run_in_executor(
            self._executor, DatabusStreamStore(documents).follow)
        await broker.start()
        await self._listening.start(lambda name: broker_connection(
            broker, self.security, self._listening.listeners, name))
        preload(HANDLERS)
        self._maintenance = loop.create_task(broker.partitions.maintain(
            self.config.log_checkpoint_interval_ms, self.config.log_retention_check_interval_ms,
            CleanerService(self.config.log_cleaner_backoff_ms,
                           self.config.log_cleaner_dedupe_buffer_size)))
        await self.membership.start(broker.partitions, broker.coordinators)
        log.info("BMQ broker %d listening on %s, ZooKeeper %s, storage %s",
                 self.config.node_id, self._listening.describe(), self.config.zookeeper,
                 self.config.storage)

    async def stop(self, drain: bool = True) -> None:
        if drain and self.broker is not None:
            await self.membership.drain(self.config.drain_timeout_ms / 1000)
        self._listening.close()
        if self._maintenance is not None:
            self._maintenance.cancel()
        if self.broker is not None:
            if not self.membership.can_acknowledge():
                # Our write right may be gone: drop what is left unflushed.
                for partition in list(self.broker.partitions.all()):
                    self.broker.partitions.abandon(partition.topic, partition.index)
            await self.broker.stop()
        await self.membership.stop()
        started = time.monotonic()
        self._executor.shutdown(wait=True)
        if time.monotonic() - started > 1:
            log.info("waited %.1f s for storage work in progress", time.monotonic() - started)
        metrics.stop(self._metrics_server)
        log.info("BMQ broker stopped cleanly")



def run_broker(config: Config, storage_options: dict[str, str] | None = None) -> None:
    run_until_signalled(ClusterBrokerServer(config, storage_options))
