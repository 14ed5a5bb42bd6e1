"""The databus agent: its ways in (the Kafka port, HTTP and a Unix socket) over one intake,
batcher, spool and sender; the stream mappings asked of the cluster's brokers every
``mappings_interval_ms``. Ports are bound and the spool recovered before anything is served;
what the spool held when the agent last stopped (or was killed) is sent first. An agent of
several ``workers`` is as many of these, one a process (bmq/databus/workers.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from bmq import metrics
from bmq.databus.batcher import Batcher, OpenBatch
from bmq.databus.cluster import Cluster
from bmq.databus.intake import Intake
from bmq.databus.kafka_port import KafkaPort
from bmq.databus.pressure import Pressure
from bmq.databus.sender import BACKOFF_MAX_S, Sender
from bmq.databus.settings import DatabusSettings
from bmq.databus.spool import Spool, SpooledBatch, client_batches_in
from bmq.databus.stats import Stats, StatsCollector, export
from bmq.databus.streams import StreamTable
from bmq.databus.workers import (
    LAST_RUN_SENT,
    STATUS_INTERVAL_S,
    AgentSockets,
    Workers,
    bind_sockets,
    merged_status,
    other_spools,
    read_statuses,
    spool_dir,
    write_status,
)
from bmq.listeners import split_host_port
from bmq.net.client import LinkError
from bmq.net.connection import KafkaConnection
from bmq.net.listening import cannot_listen
from bmq.protocol.errors import KafkaError
from bmq.startup import ExitCode, StartupError

log = logging.getLogger(__name__)


class Databus:
    def __init__(self, settings: DatabusSettings, worker: int = 0,
                 bound: AgentSockets | None = None) -> None:
        """``worker``: which of the agent's workers this is; ``bound``: its sockets (bound by
        the first worker; None: bind them)."""
        self.settings = settings
        self.worker = worker
        self.spool_dir = spool_dir(settings, worker)
        self.spool = Spool(self.spool_dir, settings.spool_bytes)
        self.table = StreamTable(settings)
        self.cluster = Cluster(settings.cluster, settings.cluster_properties, self.spool_dir)
        self.stats = Stats()
        self.sender = Sender(self.cluster, self.spool, self.stats)
        self.batcher = Batcher(self.spool, self._spooled, self.stats,
                               settings.max_message_bytes)
        self.intake = Intake(settings, self.table, self.cluster, self.batcher, self.stats)
        host, port = split_host_port(settings.listen)
        self.kafka = KafkaPort(self.intake, (_advertised_host(host), port),
                               lambda: self.table.mappings.keys(),
                               self.sender, worker, settings)
        self.pressure = Pressure(self.kafka.memory, self.sender.oldest_waiting_s,
                                 lambda: bool(self.sender.failing))
        self._bound = bound
        self._workers: Workers | None = None
        self._servers: list[asyncio.Server] = []
        self._http: Any = None
        self._metrics_server: Any = None
        self._tasks: list[asyncio.Task[None]] = []

    def _spooled(self, spooled: SpooledBatch, batch: OpenBatch) -> None:
        self.sender.enqueue(spooled, batch)

    def status(self) -> dict[str, Any]:
        """What ``GET /status`` answers (``bmq databus status`` shows it): every worker's."""
        if self.settings.workers == 1:
            return self._own_status()
        return {**merged_status(self._own_status(),
                                read_statuses(self.settings, self.worker)),
                "workers": self.settings.workers}

    def _own_status(self) -> dict[str, Any]:
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
        every_workers: list[AgentSockets] = []
        if self._bound is None:
            every_workers = bind_sockets(self.settings)
            self._bound = every_workers[0]
        if self.worker == 0:
            self._check_other_spools()
            for other in range(self.settings.workers):
                (spool_dir(self.settings, other) / LAST_RUN_SENT).unlink(missing_ok=True)
        try:
            pending = self.spool.recover()
        except OSError as error:
            raise StartupError(f"spool {self.spool_dir}: {error}",
                               ExitCode.STORAGE) from error
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._mark_last_run_sent()))
        for spooled in pending:
            self.sender.enqueue(spooled, None)
        if not pending:
            self.sender.recovered_sent.set()
        for window in self.spool.client_batches.values():
            self.kafka.producers.resume(window, self.worker)
        for other in range(self.settings.workers):
            if other != self.worker:
                self.kafka.producers.resume(
                    client_batches_in(spool_dir(self.settings, other)), other)
        if pending:
            log.info("spool: %d batches (%d bytes) to send from the last run", len(pending),
                     self.spool.used_bytes)
        if self.worker == 0 and self.settings.workers > 1:
            self._workers = Workers(self.settings, every_workers)
            await self._workers.start()
        for sock in self._bound.kafka:
            try:
                self._servers.append(await loop.create_server(
                    lambda: KafkaConnection(self.kafka.service()), sock=sock, backlog=1024))
            except OSError as error:
                raise cannot_listen(host, port, error) from error
        if self.settings.metrics_port and self.worker == 0:
            export(StatsCollector(self.status))
            self._metrics_server = metrics.serve_for_role(self.settings.metrics_port,
                                                          self.settings.metrics_host)
        if self.settings.http_listen or self.settings.unix_socket:
            from bmq.databus.http import start_http

            self._http = await start_http(self.intake, self._bound, self.status)
        self.pressure.start()
        self._tasks += [loop.create_task(self.sender.run()),
                        loop.create_task(self._follow_mappings())]
        if self.settings.workers > 1:
            self._tasks.append(loop.create_task(self._write_status()))
        log.info("databus%s listening on %s (Kafka)%s%s, cluster %s, spool %s",
                 f" worker {self.worker}" if self.settings.workers > 1 else "",
                 self.settings.listen,
                 f", {self.settings.http_listen} (HTTP)" if self.settings.http_listen else "",
                 f", {self.settings.unix_socket} (HTTP)" if self.settings.unix_socket else "",
                 self.settings.cluster, self.spool_dir)

    def _check_other_spools(self) -> None:
        """Refuse to start while a spool no worker of this run reads holds batches."""
        for directory, workers in other_spools(self.settings):
            spool = Spool(directory, self.settings.spool_bytes)
            try:
                pending = spool.recover()
            except OSError as error:
                raise StartupError(f"spool {directory}: {error}", ExitCode.STORAGE) from error
            finally:
                spool.close()
            if pending:
                raise StartupError(
                    f"spool {directory} holds {len(pending)} batches of a run with another "
                    f"number of workers (workers = {workers}): start with that many until "
                    f"they are sent", ExitCode.USAGE)

    async def _mark_last_run_sent(self) -> None:
        """Say (to the other workers) once what the last run spooled here is sent."""
        await self.sender.recovered_sent.wait()
        if self.settings.workers > 1:
            (self.spool_dir / LAST_RUN_SENT).touch()

    async def _write_status(self) -> None:
        while True:
            write_status(self.spool_dir, self._own_status())
            await asyncio.sleep(STATUS_INTERVAL_S)

    async def _follow_mappings(self) -> None:
        interval = self.settings.mappings_interval_ms / 1000
        failure = ""
        said_unserved = False
        while True:
            try:
                if not await self.cluster.read_mappings(self.table) and not said_unserved:
                    log.warning("the cluster keeps no stream mappings (not a BMQ cluster): "
                                "every stream goes to the topic of its own name")
                    said_unserved = True
                failure = ""
            except (LinkError, OSError, TimeoutError, KafkaError) as error:
                why = str(error) or type(error).__name__
                if why != failure:
                    log.warning("stream mappings not read: %s (using the last ones)", why)
                failure = why
            await asyncio.sleep(interval if not failure else min(interval * 2, BACKOFF_MAX_S))

    async def stop(self) -> None:
        if self._workers is not None:
            await self._workers.stop()
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
        if self.settings.workers > 1:
            write_status(self.spool_dir, self._own_status())
        self.spool.close()
        self.cluster.close()
        if self._metrics_server is not None:
            metrics.stop(self._metrics_server)
        log.info("databus stopped; %d batches (%d bytes) stay spooled", self.sender.pending(),
                 self.spool.used_bytes)


def _advertised_host(host: str) -> str:
    """Where clients of this host reach a port bound to ``host`` (a wildcard: localhost)."""
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
