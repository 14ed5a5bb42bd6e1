"""The mirror role: the copy of batches runs all the time; source metadata (new topics and
partitions, configs) and group offsets are looked at every few seconds. Nothing that fails is
fatal: an unreachable cluster is asked again with back-off and reported (the log, the metrics,
each partition's error) until it answers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from bmq import metrics
from bmq.mirror.cluster import Cluster
from bmq.mirror.copier import BACKOFF_FIRST_S, BACKOFF_MAX_S, Copier
from bmq.mirror.members import Membership
from bmq.mirror.offsets import GroupOffsets
from bmq.mirror.settings import MirrorSettings
from bmq.mirror.topics import sync_topics
from bmq.net.client import LinkError
from bmq.protocol.errors import KafkaError

log = logging.getLogger(__name__)

CLIENT_ID = "bmq-mirror"
REPORT_INTERVAL_S = 1.0


class Mirror:
    def __init__(self, settings: MirrorSettings) -> None:
        self.settings = settings
        self.source = Cluster(settings.source, settings.source_properties, CLIENT_ID)
        self.target = Cluster(settings.target, settings.target_properties, CLIENT_ID)
        self.copier = Copier(settings.name, self.source, self.target, settings.fetch_max_bytes,
                             settings.partition_max_bytes)
        self.offsets = GroupOffsets(settings, self.source, self.target, self.copier)
        self.members = Membership(settings.name, self.target, settings.session_timeout_ms,
                                  settings.heartbeat_interval_ms)
        self._mirrored: dict[str, int] = {}     # topic -> the source's partition count
        self._refused: dict[str, str] = {}
        self._metrics_server: object | None = None
        self._running: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self.settings.metrics_port:
            self._metrics_server = metrics.serve_for_role(self.settings.metrics_port,
                                                          self.settings.metrics_host)
        log.info("mirroring %s (%s) into %s", self.settings.name, self.settings.source,
                 self.settings.target)
        self._running = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        if self._running is not None:
            self._running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._running
            await self.members.leave()
        self.source.close()
        self.target.close()
        if self._metrics_server is not None:
            metrics.stop(self._metrics_server)

    async def run(self) -> None:
        copying = asyncio.get_running_loop().create_task(self.copier.run())
        try:
            await asyncio.gather(
                _every(self.settings.metadata_interval_ms / 1000, "source metadata",
                       self._sync_topics),
                _every(self.settings.heartbeat_interval_ms / 1000, "mirror group",
                       self._heartbeat),
                _every(self.settings.offsets_interval_ms / 1000, "group offsets",
                       self.offsets.copy),
                _every(REPORT_INTERVAL_S, "report", self._report))
        finally:
            copying.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await copying

    async def _sync_topics(self) -> None:
        found = await sync_topics(self.settings, self.source, self.target)
        for name, why in found.refused.items():
            if self._refused.get(name) != why:
                log.warning("topic %s is not mirrored: %s", name, why)
        self._refused = found.refused
        self._mirrored = found.mirrored
        self._assign()

    async def _heartbeat(self) -> float:
        wait = await self.members.heartbeat(sorted(self._mirrored))
        self._assign()
        return wait

    def _assign(self) -> None:
        """The partitions this process mirrors: those of the mirrored topics its group gave
        it."""
        self.copier.assign({(topic, index) for topic, index in self.members.assigned
                            if index < self._mirrored.get(topic, 0)})

    async def _report(self) -> None:
        self.copier.report()


async def _every(interval_s: float, what: str,
                 work: Callable[[], Awaitable[float | None]]) -> None:
    """``work`` now and then every ``interval_s`` (or as long as it says); after a failure,
    again with back-off."""
    backoff = 0.0
    failure = ""
    while True:
        wait = interval_s
        try:
            wait = await work() or interval_s
            if failure:
                log.info("%s: working again", what)
            backoff, failure = 0.0, ""
        except (LinkError, OSError, TimeoutError, KafkaError) as error:
            why = str(error) or type(error).__name__
            if why != failure:
                log.warning("%s: %s (retrying with back-off)", what, why)
            failure = why
            backoff = min(BACKOFF_MAX_S, max(BACKOFF_FIRST_S, backoff * 2))
        await asyncio.sleep(min(backoff, interval_s) if failure else wait)
