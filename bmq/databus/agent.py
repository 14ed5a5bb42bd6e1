"""The databus agent: its ways in (the Kafka port, HTTP and a Unix socket) over one intake,
batcher, spool and sender; the stream mappings read from the cluster every
``mappings_interval_ms``. Ports are bound and the spool recovered before anything is served;
what the spool held when the agent last stopped (or was killed) is sent first."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from pathlib import Path
from typing import Any

from bmq import metrics
from bmq.databus.batcher import Batcher, OpenBatch
from bmq.databus.cluster import Cluster
from bmq.databus.intake import Intake
from bmq.databus.kafka_port import KafkaPort
from bmq.databus.pressure import Pressure
from bmq.databus.sender import BACKOFF_MAX_S, Sender
from bmq.databus.settings import DatabusSettings
from bmq.databus.spool import Spool, SpooledBatch
from bmq.databus.stats import Stats, StatsCollector, export
from bmq.databus.streams import StreamTable
from bmq.listeners import split_host_port
from bmq.net.client import LinkError
from bmq.net.connection import KafkaConnection
from bmq.net.listening import bind_listeners, cannot_listen
from bmq.protocol.errors import KafkaError
from bmq.startup import ExitCode, StartupError

log = logging.getLogger(__name__)


class Databus:
    def __init__(self, settings: DatabusSettings) -> None:
        self.settings = settings
        self.spool = Spool(settings.spool_dir, settings.spool_bytes)
        self.table = StreamTable(settings)
        self.cluster = Cluster(settings.cluster, settings.cluster_properties,
                               Path(settings.spool_dir))
        self.stats = Stats()
        self.sender = Sender(self.cluster, self.spool, self.stats)
        self.batcher = Batcher(self.spool, self._spooled, self.stats,
                               settings.max_message_bytes)
        self.intake = Intake(settings, self.table, self.cluster, self.batcher, self.stats)
        host, port = split_host_port(settings.listen)
        self.kafka = KafkaPort(self.intake, (_advertised_host(host), port),
                               lambda: self.table.mappings.keys(),
                               self.sender.recovered_sent)
        self.pressure = Pressure(self.kafka.memory, self.sender.oldest_waiting_s,
                                 lambda: bool(self.sender.failing))
        self._sockets: list[socket.socket] = []
        self._servers: list[asyncio.Server] = []
        self._http: Any = None
        self._metrics_server: Any = None
        self._tasks: list[asyncio.Task[None]] = []

    def _spooled(self, spooled: SpooledBatch, batch: OpenBatch) -> None:
        self.sender.enqueue(spooled, batch)

    def status(self) -> dict[str, Any]:
        """What ``GET /status`` answers (``bmq databus status`` shows it)."""
        return {"cluster": self.settings.cluster,
                "cluster_failing": self.sender.failing or None,
                "spool_bytes": self.spool.used_bytes, "spool_limit_bytes": self.spool.limit_bytes,
                "waiting_batches": self.sender.pending(), "open_bytes": self.batcher.open_bytes,
                "reading_held": self.kafka.memory.held,
                "reading_held_s": round(self.pressure.held_seconds, 3),
                "streams": {stream: mapping.topic
                            for stream, mapping in sorted(self.table.mappings.items())},
                **self.stats.snapshot()}

    async def start(self) -> None:
        host, port = split_host_port(self.settings.listen)
        self._sockets = bind_listeners(host, port)
        try:
            pending = self.spool.recover()
        except OSError as error:
            raise StartupError(f"spool {self.settings.spool_dir}: {error}",
                               ExitCode.STORAGE) from error
        for spooled in pending:
            self.sender.enqueue(spooled, None)
        if not pending:
            self.sender.recovered_sent.set()
        for window in self.spool.client_batches.values():
            self.kafka.producers.resume(window)
        if pending:
            log.info("spool: %d batches (%d bytes) to send from the last run", len(pending),
                     self.spool.used_bytes)
        loop = asyncio.get_running_loop()
        for sock in self._sockets:
            try:
                self._servers.append(await loop.create_server(
                    lambda: KafkaConnection(self.kafka.service()), sock=sock, backlog=1024))
            except OSError as error:
                raise cannot_listen(host, port, error) from error
        if self.settings.metrics_port:
            export(StatsCollector(self.stats, lambda: (
                self.spool.used_bytes, self.spool.limit_bytes, self.sender.pending())))
            self._metrics_server = metrics.serve_for_role(self.settings.metrics_port,
                                                          self.settings.metrics_host)
        if self.settings.http_listen or self.settings.unix_socket:
            from bmq.databus.http import start_http

            self._http = await start_http(self.intake, self.settings, self.status)
        self.pressure.start()
        self._tasks = [loop.create_task(self.sender.run()),
                       loop.create_task(self._follow_mappings())]
        log.info("databus listening on %s (Kafka)%s%s, cluster %s, spool %s",
                 self.settings.listen,
                 f", {self.settings.http_listen} (HTTP)" if self.settings.http_listen else "",
                 f", {self.settings.unix_socket} (HTTP)" if self.settings.unix_socket else "",
                 self.settings.cluster, self.settings.spool_dir)

    async def _follow_mappings(self) -> None:
        interval = self.settings.mappings_interval_ms / 1000
        failure = ""
        while True:
            try:
                await self.cluster.read_mappings(self.table)
                failure = ""
            except (LinkError, OSError, TimeoutError, KafkaError) as error:
                why = str(error) or type(error).__name__
                if why != failure:
                    log.warning("stream mappings not read: %s (using the last ones)", why)
                failure = why
            await asyncio.sleep(interval if not failure else min(interval * 2, BACKOFF_MAX_S))

    async def stop(self) -> None:
        self.pressure.stop()
        for server in self._servers:
            server.close()
        if self._http is not None:
            await self._http.cleanup()
        # What applications handed over is spooled; what the cluster has not taken yet stays
        # there for the next start.
        await self.batcher.flush()
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.sender.stop()
        self.spool.close()
        self.cluster.close()
        if self._metrics_server is not None:
            metrics.stop(self._metrics_server)
        log.info("databus stopped; %d batches (%d bytes) stay spooled", self.sender.pending(),
                 self.spool.used_bytes)


def _advertised_host(host: str) -> str:
    """Where clients of this host reach a port bound to ``host`` (a wildcard: localhost)."""
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
