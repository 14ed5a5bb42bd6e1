"""`bmq serve`: a cluster of one in one process on a local data directory, no ZooKeeper: the
broker, its consumer-group coordinator, and the read path answering fetches
(bmq.broker.fetch_views)."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, TypeVar

from bmq import metrics
from bmq.broker.broker import Broker
from bmq.broker.console_process import start_console, stop_console
from bmq.broker.handlers import HANDLERS
from bmq.broker.membership.standalone import StandaloneMembership
from bmq.broker.service import broker_connection
from bmq.cleaner import CleanerService
from bmq.config import Config
from bmq.coordinators.transactions import TxnState
from bmq.field_index.http import index_app
from bmq.field_index.query import QueryService
from bmq.lifecycle import run_until_signalled
from bmq.metadata.broker_configs import BrokerConfigStore
from bmq.metadata.databus_streams import DatabusStreamStore
from bmq.metadata.documents import StorageDocuments
from bmq.metadata.group_configs import GroupConfigStore
from bmq.metadata.nodes import BrokerNode
from bmq.net.api import preload
from bmq.net.connection import KafkaConnection
from bmq.net.listening import Listening
from bmq.security.loading import load_security_metadata, role_security
from bmq.startup import ExitCode, StartupError
from bmq.storage import open_storage
from bmq.storage.data_dir import DataDirLock, check_data_dir, lock_data_dir
from bmq.writepath.partitions import now_ms

log = logging.getLogger(__name__)
T = TypeVar("T")

# Flushes block in fsync and recovery in reads, outside the GIL: enough threads to overlap them.
WORKER_THREADS = 16


def standalone_broker(config: Config, executor: Executor) -> Broker:
    """The broker of `bmq serve` on ``config.data_dir``: partitions in ``topics/``, metadata in
    ``meta/`` (not started)."""
    data_dir = os.path.abspath(config.data_dir)
    os.makedirs(os.path.join(data_dir, "topics"), exist_ok=True)
    os.makedirs(os.path.join(data_dir, "meta"), exist_ok=True)
    host, port = config.advertised
    node = BrokerNode(config.node_id, host, port, endpoints=config.advertised_endpoints)
    membership = StandaloneMembership(node,
                                      open_storage(os.path.join(data_dir, "meta")),
                                      config.producer_id_block_size)
    return Broker(config, open_storage(os.path.join(data_dir, "topics")), executor, membership)


class BrokerServer:
    """`bmq serve`. Start-up checks what can fail before it creates anything: the data
    directory is usable, the Kafka port (and the metrics port) can be bound; then it takes the
    data directory's lock (one writer per directory), and only then opens or creates its
    contents. Each failure is a ``StartupError`` the `bmq` command prints as one line."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.data_dir = os.path.abspath(config.data_dir)
        self._executor = ThreadPoolExecutor(WORKER_THREADS, thread_name_prefix="bmq-io")
        self.broker: Broker | None = None
        self._lock: DataDirLock | None = None
        self.security, _ = role_security(config, links=False)
        self._listening = Listening(config.listener_list, self.security.tls_contexts, sasl=True)
        self._maintenance: asyncio.Task[None] | None = None
        self._metrics_server: Any = None
        self._console: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        config = self.config
        check_data_dir(self.data_dir)
        self._listening.bind()
        if config.metrics_port:
            self._metrics_server = serve_metrics_of(config, lambda: self.broker)
        self._lock = lock_data_dir(self.data_dir)
        try:
            broker = self.broker = standalone_broker(config, self._executor)
            await broker.start()
            meta = open_storage(os.path.join(self.data_dir, "meta"))
            documents = StorageDocuments(meta)
            load_security_metadata(self.security, config, documents)
            broker.dynamic_configs = BrokerConfigStore(documents).load()
            broker.group_configs = GroupConfigStore(documents).load()
            broker.databus_streams = DatabusStreamStore(documents).load()
        except OSError as error:  # a file of the data directory we cannot read or write
            raise StartupError(f"cannot use data directory {self.data_dir}: {error}",
                               ExitCode.STORAGE) from error
        loop = asyncio.get_running_loop()
        await self._listening.start(self._connection)
        preload(HANDLERS)
        self._maintenance = loop.create_task(broker.partitions.maintain(
            config.log_checkpoint_interval_ms, config.log_retention_check_interval_ms,
            CleanerService(config.log_cleaner_backoff_ms, config.log_cleaner_dedupe_buffer_size)))
        log.info("BMQ broker %d listening on %s, data in %s", config.node_id,
                 self._listening.describe(), self.data_dir)
        self._console = start_console(config)

    def _connection(self, name: str) -> KafkaConnection:
        assert self.broker is not None
        return broker_connection(self.broker, self.security, self._listening.listeners, name)

    async def stop(self) -> None:
        """Stop accepting, flush and checkpoint every partition, then let the directory go."""
        self._listening.close()
        stop_console(self._console)
        if self._maintenance is not None:
            self._maintenance.cancel()
        if self.broker is not None:
            await self.broker.stop()
        self._executor.shutdown(wait=True)
        metrics.stop(self._metrics_server)
        if self._lock is not None:
            self._lock.release()
        log.info("BMQ broker stopped cleanly")


def serve_metrics_of(config: Config, broker: Callable[[], Broker | None]) -> Any:
    """/metrics of a role that runs a broker (`bmq serve`, `bmq broker`; see bmq.metrics).
    ``broker()`` is None until the broker exists: the port is bound before the role creates
    anything, and the gauges read 0 until then."""
    return metrics.serve_for_role(
        config.metrics_port, config.listen_host,
        partitions=lambda: _count_partitions(broker()),
        groups=lambda: _count_groups(broker()),
        transactions=lambda: _transaction_stats(broker()),
        topics_app=index_app(lambda: _queries(broker()), bool(config.authorizer_class_name)))


def _queries(broker: Broker | None) -> QueryService | None:
    return None if broker is None else broker.queries


def _count_partitions(broker: Broker | None) -> float:
    return 0.0 if broker is None else float(sum(1 for _ in broker.partitions.all()))


def _count_groups(broker: Broker | None) -> float:
    if broker is None:
        return 0.0
    count = _while_changing(lambda: float(len(broker.groups.list_groups()[1])))
    return float("nan") if count is None else count


def _transaction_stats(broker: Broker | None) -> metrics.TransactionStats | None:
    """Open transactions (ONGOING on this broker's coordinator) and partitions' LSO lags."""
    if broker is None:
        return None

    def stats() -> metrics.TransactionStats:
        starts = [m.start_ms for m in broker.transactions.all_txns()
                  if m.state == TxnState.ONGOING and m.start_ms >= 0]
        lags = [(p.topic, p.index, p.log.high_watermark - p.log.last_stable_offset())
                for p in broker.partitions.all() if p.log.open_transactions()]
        oldest = (now_ms() - min(starts)) / 1000 if starts else 0.0
        return metrics.TransactionStats(len(starts), oldest, lags)

    return _while_changing(stats)


def _while_changing(read: Callable[[], T]) -> T | None:
    """``read()`` of state the event loop changes, from the scrape thread: a dict that changed
    size under an iteration makes it try again (three times)."""
    for _ in range(3):
        try:
            return read()
        except RuntimeError:
            continue
    return None


def serve(config: Config) -> None:
    run_until_signalled(BrokerServer(config))
