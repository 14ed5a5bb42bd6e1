"""`bmq proxy`: a stateless fetch tier in front of shared storage (see bmq/proxy/__init__.py)."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bmq import metrics
from bmq.config import Config
from bmq.field_index.http import index_app
from bmq.lifecycle import run_until_signalled
from bmq.metadata.zookeeper.documents import ZkDocuments
from bmq.net.api import preload
from bmq.net.client import LinkPool
from bmq.net.connection import KafkaConnection
from bmq.net.listening import Listening
from bmq.protocol.headers import RequestHeader
from bmq.proxy.cluster_view import ClusterView
from bmq.proxy.handlers import HANDLERS, TABLES, ProxyContext
from bmq.proxy.proxy import Proxy
from bmq.security.link import ActingFor
from bmq.security.loading import load_security_metadata, role_security
from bmq.security.session import Session
from bmq.storage.counting import CountingStorage
from bmq.storage.factory import check_backend, open_log_storage

log = logging.getLogger(__name__)

# Storage reads block (S3 GETs, preads) outside the GIL: enough threads to overlap them.
WORKER_THREADS = 16


class ProxyService:
    """The proxy as one client connection sees it (``bmq.net.connection.Service``).

    Each client connection forwards its requests (Produce, relayed APIs) on links of its own:
    a broker answers a connection's requests in order, so on a link shared by every client
    one client's slow request (a large acks=all Produce, a CreateTopics waiting for its
    partitions) would hold up the others' answers. A client's own requests stay in order."""

    observe = staticmethod(metrics.observe_response)

    def __init__(self, proxy: Proxy, listener: str, session: Session) -> None:
        self.proxy = proxy
        self.handlers = TABLES.served(proxy.config.legacy_clients_enable)
        self.listener = listener
        self.session = session
        self.max_frame_bytes = proxy.config.socket_request_max_bytes
        self.max_inflight = proxy.config.max_inflight_requests_per_connection
        self.request_memory = proxy.request_memory
        # Opened once the client has authenticated (nothing is forwarded before), each link
        # acts for the client's principal.
        self.links = LinkPool(security=ActingFor(proxy.link_security, session))
        proxy.client_links.add(self.links)

    def context(self, header: RequestHeader, client_host: str, frame: bytearray) -> ProxyContext:
        return ProxyContext(self.proxy, self.links, header, client_host, frame, self.listener,
                            self.session)

    def close(self) -> None:
        self.links.close()


class ProxyServer:
    def __init__(self, config: Config, storage_options: dict[str, str] | None = None
                 ) -> None:
        self.config = config
        self._executor = ThreadPoolExecutor(WORKER_THREADS, thread_name_prefix="bmq-proxy-io")
        # Opened once the ports are bound and ZooKeeper answers (a local directory is created
        # when opened), but a missing package (s3, hdfs) stops us now.
        check_backend(config.storage)
        self._storage_options = storage_options
        self.cluster = ClusterView(config.zookeeper, config.zookeeper_root,
                                   config.zookeeper_session_timeout_ms, self._executor)
        self.proxy: Proxy | None = None
        # Links to other nodes log in to their inter-broker listener.
        self.security, self._link_security = role_security(config, links=True)
        self._listening = Listening(config.listener_list, self.security.tls_contexts, sasl=True)
        self._metrics_server: Any = None

    async def start(self) -> None:
        # Ports first: a port in use stops us before we touch ZooKeeper or storage.
        self._listening.bind()
        if self.config.metrics_port:
            self._metrics_server = metrics.serve_for_role(
                self.config.metrics_port, self.config.listen_host,
                topics_app=index_app(lambda: None if self.proxy is None else self.proxy.queries,
                                     bool(self.config.authorizer_class_name)))
        loop = asyncio.get_running_loop()
        host, port = self.config.advertised
        await loop.run_in_executor(self._executor, self.cluster.connect, host, port,
                                   self.config.advertised_endpoints)
        assert self.cluster.zk is not None
        await loop.run_in_executor(self._executor, load_security_metadata, self.security,
                                   self.config, ZkDocuments(self.cluster.zk, self.cluster.paths))
        storage = open_log_storage(self.config.storage, self._storage_options)
        proxy = self.proxy = Proxy(
            self.config, CountingStorage(storage, metrics.PROXY_STORAGE_READS.inc),
            self._executor, self.cluster, self._link_security)
        # Listen only once the cluster view is read: an empty Metadata answer would make
        # librdkafka give up on this address for a long while.
        await proxy.start()
        await self._listening.start(self._connection)
        preload(HANDLERS)
        await self.cluster.announce()
        log.info("BMQ proxy %d listening on %s, ZooKeeper %s, storage %s",
                 proxy.node.node_id, self._listening.describe(), self.config.zookeeper,
                 self.config.storage)

    def _connection(self, name: str) -> KafkaConnection:
        assert self.proxy is not None
        [listener] = [each for each in self._listening.listeners if each.name == name]
        session = self.security.session(listener)
        return KafkaConnection(ProxyService(self.proxy, name, session), session)

    async def stop(self) -> None:
        self._listening.close()
        if self.proxy is not None:
            await self.proxy.stop()
        self._executor.shutdown(wait=True)
        metrics.stop(self._metrics_server)
        log.info("BMQ proxy stopped cleanly")



def run_proxy(config: Config, storage_options: dict[str, str] | None = None) -> None:
    run_until_signalled(ProxyServer(config, storage_options))
