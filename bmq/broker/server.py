"""`bmq serve`: a cluster of one in one process on a local data directory, no ZooKeeper: the
broker, its consumer-group coordinator, and the read path answering fetches
(bmq.broker.fetch_views)."""

from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

from bmq import metrics
from bmq.broker.broker import Broker
from bmq.broker.membership.standalone import StandaloneMembership
from bmq.broker.service import BrokerService
from bmq.config import Config
from bmq.lifecycle import run_until_signalled
from bmq.metadata.nodes import BrokerNode
from bmq.net.connection import KafkaConnection
from bmq.net.listening import Listening
from bmq.storage import open_storage

log = logging.getLogger(__name__)

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
    def __init__(self, config: Config) -> None:
        self.config = config
        self._executor = ThreadPoolExecutor(WORKER_THREADS, thread_name_prefix="bmq-io")
        self.broker = standalone_broker(config, self._executor)
        self._listening = Listening(config.listener_list)
        self._maintenance: asyncio.Task[None] | None = None
        self._metrics_server: Any = None

    async def start(self) -> None:
        if self.config.metrics_port:  # first, so a busy port stops us before recovery
            self._start_metrics()
        await self.broker.start()
        loop = asyncio.get_running_loop()
        broker = self.broker
        await self._listening.start(lambda name: KafkaConnection(BrokerService(broker, name)))
        self._maintenance = loop.create_task(self.broker.partitions.maintain(
            self.config.log_checkpoint_interval_ms, self.config.log_retention_check_interval_ms))
        log.info("BMQ broker %d listening on %s, data in %s", self.config.node_id,
                 self._listening.describe(), os.path.abspath(self.config.data_dir))

    def _start_metrics(self) -> None:
        self._metrics_server = serve_metrics(self.config, self.broker)

    async def stop(self) -> None:
        """Stop accepting, flush and checkpoint every partition."""
        self._listening.close()
        if self._maintenance is not None:
            self._maintenance.cancel()
        await self.broker.stop()
        self._executor.shutdown(wait=True)
        metrics.stop(self._metrics_server)
        log.info("BMQ broker stopped cleanly")



def serve_metrics(config: Config, broker: Broker) -> Any:
    """/metrics of a role that runs ``broker`` (`bmq serve`, `bmq broker`); see bmq.metrics."""
    return metrics.serve_for_role(
        config.metrics_port, config.listen_host,
        partitions=lambda: sum(1 for _ in broker.partitions.all()),
        groups=lambda: _count_groups(broker))


def _count_groups(broker: Broker) -> float:
    """Groups coordinated here; read from the scrape thread while the loop changes them."""
    for _ in range(3):
        try:
            return float(len(broker.groups.list_groups()[1]))
        except RuntimeError:  # a dict changed size under the iteration: try again
            continue
    return float("nan")


def serve(config: Config) -> None:
    run_until_signalled(BrokerServer(config))
