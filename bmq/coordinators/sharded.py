"""What every coordinator of an internal log does the same way, written once: make sure its
internal topic exists (at start, or on first use: ``InternalLog.created_on_first_use``) with the
configs its declaration (``bmq.metadata.topics.INTERNAL_LOGS``) implies, load and unload one
shard per partition as ownership moves, tell clients when it cannot serve a key
(COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR), append records to a
shard's partition and wait until they are durable, and run its background work (``tasks``).
How its log stays small is declared per internal topic too: snapshots (``snapshots``) or the
log cleaner.

A coordinator subclasses ``ShardedCoordinator`` with its shard type (the state replayed from one
partition) and its own requests; see ``groups`` for the first of them.
"""

from __future__ import annotations

import asyncio
import logging
from abc import abstractmethod
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, Generic, Protocol, TypeVar

from bmq.coordinators.base import CoordinatorHost, InternalLogCoordinator
from bmq.coordinators.placement import partition_for
from bmq.coordinators.tasks import BackgroundTasks
from bmq.metadata.topics import INTERNAL_LOGS
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.record_codec import build_batch
from bmq.writepath.partitions import Partition, now_ms

log = logging.getLogger(__name__)

EntryT = TypeVar("EntryT")

# An append under way (its durability) or the error that stopped it.
Appended = asyncio.Future[None] | ErrorCode


def internal_topic_configs(segment_bytes: int) -> dict[str, str]:
    """What every internal log is created with: kept forever (the coordinator decides what to
    drop), any record size, and its records stored as the coordinator encodes them, whatever
    the brokers' compression.type."""
    return {"retention.ms": "-1", "retention.bytes": "-1", "segment.bytes": str(segment_bytes),
            "max.message.bytes": str(2**31 - 1), "compression.type": "producer"}


def append_records(partition: Partition, records: list[tuple[bytes, bytes | None]],
                   error_of: Callable[[ErrorCode], ErrorCode],
                   producer: tuple[int, int] | None = None) -> tuple[asyncio.Future[None], int]:
    """Append one batch of (key, value) records to a shard's partition now: its durability and
    its size. A failure raises KafkaError with ``error_of`` its code (the coordinator's
    clients' error)."""
    now = now_ms()
    batch, header = build_batch(records, now, partition.leader_epoch, producer)
    try:
        return partition.append_batch(batch, header, now), len(batch)
    except KafkaError as error:
        raise KafkaError(error_of(error.code), error.message) from error


async def wait_durable(appended: Appended,
                       error_of: Callable[[ErrorCode], ErrorCode] = lambda code: code
                       ) -> ErrorCode:
    """Wait until an append is durable (the wait may be abandoned; the write is not): NONE,
    or ``error_of`` what failed."""
    if isinstance(appended, ErrorCode):
        return appended
    try:
        await asyncio.shield(appended)
    except KafkaError as error:
        return error_of(error.code)
    return ErrorCode.NONE


class Shard(Protocol[EntryT]):
    """The state a coordinator keeps for one partition of its internal topic."""

    index: int

    async def load(self) -> None:
        """Replay the partition's log."""

    def close(self) -> None:
        """Stop background work (the partition is being handed over)."""

    def write(self, entries: list[EntryT]) -> asyncio.Future[None]:
        """Append records now; the future is done once they are durable. Raises KafkaError."""


ShardT = TypeVar("ShardT", bound=Shard[Any])


class ShardedCoordinator(InternalLogCoordinator, Generic[ShardT, EntryT]):
    """One shard per partition of ``topic`` this broker owns."""

    def __init__(self, host: CoordinatorHost, executor: Executor, num_partitions: int) -> None:
        self._host = host
        self._executor = executor
        self.config = host.config
        # The setting's count until the topic exists; then the topic's own.
        self.num_partitions = max(1, num_partitions)
        self.internal_log = INTERNAL_LOGS[self.topic]
        self.shards: dict[int, ShardT] = {}
        self._loading: set[int] = set()
        self._active = False
        self._starting: asyncio.Task[None] | None = None
        self.tasks = BackgroundTasks(f"{self.topic} coordinator")

    # ------------------------------------------------------------------ what a coordinator adds
    @abstractmethod
    def _segment_bytes(self) -> int:
        """The segment size its internal topic is created with (its own setting)."""

    @abstractmethod
    def _open_shard(self, index: int, partition: Partition) -> ShardT:
        """A shard over ``partition`` (not loaded yet)."""

    @abstractmethod
    def _write_error(self, code: ErrorCode) -> ErrorCode:
        """How a failed write to the internal log is reported to this coordinator's clients."""

    def _shard_loaded(self, shard: ShardT) -> None:
        """The shard serves requests from now on (e.g. start its timers)."""

    def _shard_unloaded(self, shard: ShardT) -> None:
        """The shard serves no more: answer what waits on it."""

    def _started(self) -> None:
        """Every shard this broker owns at start is loaded (start periodic work: ``tasks``)."""

    # ------------------------------------------------------------------ lifecycle
    def _topic_configs(self) -> dict[str, str]:
        """The configs the internal topic is created with."""
        return {**internal_topic_configs(self._segment_bytes()), **self.internal_log.configs()}

    async def start(self) -> None:
        """Load the shards, the topic created first if need be; one created on first use is
        loaded here only if it exists (else ``ensure_started`` makes it)."""
        if not self.internal_log.created_on_first_use or \
                self._host.topics.get(self.topic) is not None:
            await self._create_and_load()

    async def ensure_started(self) -> bool:
        """Create and load the topic now if need be (its first use: a FindCoordinator, say);
        concurrent callers share one start. True once the coordinator serves."""
        if self._active:
            return True
        if self._starting is None:
            self._starting = asyncio.get_running_loop().create_task(self._create_and_load())
        try:
            await asyncio.shield(self._starting)
        except Exception:
            log.exception("could not create %s", self.topic)
            self._starting = None
        return self._active

    async def _create_and_load(self) -> None:
        info = self._host.topics.get(self.topic)
        if info is None:
            try:
                info = await self._host.create_topic(self.topic, self.num_partitions,
                                                     configs=self._topic_configs())
            except KafkaError as error:
                if error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    raise
                info = self._host.topics.get(self.topic)   # made through another broker
                assert info is not None
        elif info.partitions != self.num_partitions:
            log.warning("%s has %d partitions; the configured %d is ignored", self.topic,
                        info.partitions, self.num_partitions)
        self.num_partitions = info.partitions
        if not self._host.controller_assigns_partitions:
            await asyncio.gather(*(self.load_partition(i) for i in range(info.partitions)))
        self._active = True
        self._started()

    async def stop(self) -> None:
        self._active = False
        for index in list(self.shards):
            self.unload_partition(index)
        await self.tasks.stop()

    async def load_partition(self, index: int) -> None:
        """Cluster mode: a broker that did not see a topic created on first use at start
        (another broker created it) starts serving once the controller gives it a partition."""
        if self.internal_log.created_on_first_use and not self._active and \
                self._host.controller_assigns_partitions:
            await self.ensure_started()
        partition = self._host.partitions.get(self.topic, index)
        if partition is None:
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"{self.topic}-{index} is not open")
        shard = self._open_shard(index, partition)
        self._loading.add(index)
        try:
            await shard.load()
        finally:
            self._loading.discard(index)
        self.shards[index] = shard
        self._shard_loaded(shard)

    def unload_partition(self, index: int) -> None:
        shard = self.shards.pop(index, None)
        if shard is not None:
            shard.close()
            self._shard_unloaded(shard)

    # ------------------------------------------------------------------ serving keys
    def partition_for(self, key: str) -> int:
        return partition_for(key, self.num_partitions)

    def shard_error(self, key: str) -> ErrorCode:
        """NONE if this broker can serve ``key`` now, else the error that sends clients on."""
        if not self._active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        index = self.partition_for(key)
        if index in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if index not in self.shards:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def _append(self, key: str, entries: list[EntryT]) -> Appended:
        """Append records to ``key``'s partition now (so the log keeps the order in which the
        coordinator decided things); returns the durability future or an error."""
        shard = self.shards.get(self.partition_for(key))
        if shard is None:
            return ErrorCode.NOT_COORDINATOR
        return self._append_to(shard, entries)

    def _append_to(self, shard: ShardT, entries: list[EntryT]) -> Appended:
        try:
            return shard.write(entries)
        except KafkaError as error:
            return self._write_error(error.code)

    async def durable(self, appended: Appended) -> ErrorCode:
        """Wait until an append is durable (the wait may be abandoned; the write is not)."""
        return await wait_durable(appended, self._write_error)
