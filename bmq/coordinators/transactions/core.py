"""The transaction coordinator's machinery: shards of ``__transaction_state``, durable state
changes, ending a transaction (PrepareX, the markers, CompleteX), and the timer that aborts
transactions past their timeout and finishes those a crash left in PrepareX.

Ending a transaction, as Kafka does: the decision (PrepareCommit/PrepareAbort) is made durable
in the transaction log first; then a COMMIT or ABORT control batch is appended to every
partition of the transaction through that partition's log and group-commit writer; once all
are durable the transaction is CompleteCommit/CompleteAbort. A coordinator that loads a
PrepareX state (after a restart or kill -9) writes the markers again and completes it; a marker
written twice changes nothing (the producer has no open transaction the second time).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any

from bmq import metrics
from bmq.coordinators.base import CoordinatorHost
from bmq.coordinators.sharded import ShardedCoordinator
from bmq.coordinators.transactions.records import (
    PREPARING,
    TxnMetadata,
    TxnState,
    marker_batch,
)
from bmq.coordinators.transactions.shard import TxnShard, coordinator_error
from bmq.metadata.topics import TRANSACTION_TOPIC, TopicPartition
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.writepath.partitions import Partition, now_ms

log = logging.getLogger(__name__)

# Test hook (as the Spark Parquet export's): SIGKILL this process at a named step of EndTxn.
CRASH_ENV = "BMQ_TXN_CRASH_AT"
MAX_EPOCH = 32767
MARKER_RETRY_S = 0.5

# Called once a marker is durable in a partition: (topic, partition, producer id, commit).
MarkerListener = Callable[[str, int, int, bool], None]
# Writes markers into partitions other brokers own (cluster mode): (producer id, epoch,
# commit, coordinator epoch, partitions) -> each partition's outcome.
RemoteMarkerWriter = Callable[[int, int, bool, int, list[TopicPartition]],
                              Awaitable[dict[TopicPartition, ErrorCode]]]


def crash_point(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        log.warning("%s=%s: killing this process", CRASH_ENV, name)
        os.kill(os.getpid(), signal.SIGKILL)


def append_marker(partition: Partition, producer_id: int, producer_epoch: int, commit: bool,
                  coordinator_epoch: int, now: int) -> asyncio.Future[None]:
    """Append a COMMIT or ABORT marker of the producer to ``partition`` (a partition this
    broker owns): the future is done once it is durable. Raises KafkaError."""
    batch, header = marker_batch(producer_id, producer_epoch, commit, coordinator_epoch, now,
                                 partition.leader_epoch)
    written = partition.append_batch(batch, header, now)
    hook = partition.marker_hook
    held = None if hook is None else hook(producer_id, producer_epoch, commit,
                                          coordinator_epoch, now)
    # Scheduled records of the transaction wait in the partition's timer log: the marker is
    # durable (and the coordinator may complete the transaction) once it is in both.
    return written if held is None else asyncio.ensure_future(_both(written, held))


async def _both(first: asyncio.Future[None], second: asyncio.Future[None]) -> None:
    await first
    await second


class TxnCoordinatorCore(ShardedCoordinator[TxnShard, TxnMetadata | str]):
    topic = TRANSACTION_TOPIC

    def __init__(self, host: CoordinatorHost, executor: Executor,
                 on_marker: MarkerListener | None = None,
                 write_elsewhere: RemoteMarkerWriter | None = None) -> None:
        super().__init__(host, executor, host.config.transaction_state_log_num_partitions)
        self._on_marker = on_marker
        self._write_elsewhere = write_elsewhere

    def _segment_bytes(self) -> int:
        return self.config.transaction_state_log_segment_bytes

    def _open_shard(self, index: int, partition: Partition) -> TxnShard:
        return TxnShard(index, partition, self._executor)

    def _write_error(self, code: ErrorCode) -> ErrorCode:
        return coordinator_error(code)

    def _shard_loaded(self, shard: TxnShard) -> None:
        for meta in shard.txns.values():
            if meta.state in PREPARING:
                log.info("transaction %s was left in %s: completing it",
                         meta.transactional_id, meta.state.kafka_name)
                self.tasks.spawn(self._finish(meta))

    def _started(self) -> None:
        config = self.config
        for interval, check in (
                (config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                 self.abort_timed_out),
                (config.transaction_remove_expired_transaction_cleanup_interval_ms,
                 self.remove_expired)):
            if interval > 0:
                self.tasks.every(interval / 1000, check)

    # ------------------------------------------------------------------ state
    def txn(self, transactional_id: str) -> TxnMetadata | None:
        shard = self.shards.get(self.partition_for(transactional_id))
        return None if shard is None else shard.txns.get(transactional_id)

    def all_txns(self) -> list[TxnMetadata]:
        return [m for shard in self.shards.values() for m in shard.txns.values()]

    async def _persist(self, meta: TxnMetadata, **changes: Any) -> ErrorCode:
        """Make ``changes`` durable in the transaction log, then apply them to ``meta``."""
        changes.setdefault("update_ms", now_ms())
        new = dataclasses.replace(meta, **changes)
        code = await self.durable(self._append(meta.transactional_id, [new]))
        if code == ErrorCode.NONE:
            for name, value in changes.items():
                setattr(meta, name, value)
        return code

    def _bumped(self, meta: TxnMetadata) -> dict[str, Any]:
        """The next epoch (a new producer id once the epoch is exhausted): fences the current
        producer instance."""
        if meta.producer_epoch >= MAX_EPOCH - 1:
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS, "epoch exhausted")
        return {"producer_epoch": meta.producer_epoch + 1, "last_epoch": meta.producer_epoch}

    # ------------------------------------------------------------------ ending
    async def _end(self, meta: TxnMetadata, commit: bool, bump: bool = False) -> ErrorCode:
        """Under ``meta.lock``: decide (PrepareX), write the markers, complete.

        Once the decision is durable the transaction ends as decided, as in Kafka: if a
        marker cannot be written now (its partition is moving), the answer is still NONE and
        the markers are retried in the background; until they are written the producer's next
        transaction waits (CONCURRENT_TRANSACTIONS)."""
        changes = self._bumped(meta) if bump else {}
        state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        code = await self._persist(meta, state=state, **changes)
        if code != ErrorCode.NONE:
            return code
        crash_point(f"after_{state.name.lower()}")   # after_prepare_commit / _abort
        if await self._complete(meta) != ErrorCode.NONE:
            self.tasks.spawn(self._finish(meta))     # waits for meta.lock, which the caller holds
        return ErrorCode.NONE

    async def _finish(self, meta: TxnMetadata) -> None:
        """A PrepareX found on load (or left by a failed marker write): complete it."""
        async with meta.lock:
            if meta.state in PREPARING:
                while await self._complete(meta) != ErrorCode.NONE and self._active_shard(meta):
                    await asyncio.sleep(MARKER_RETRY_S)

    def _active_shard(self, meta: TxnMetadata) -> bool:
        return self.txn(meta.transactional_id) is meta

    async def _complete(self, meta: TxnMetadata) -> ErrorCode:
        commit = meta.state == TxnState.PREPARE_COMMIT
        code = await self._write_markers(meta, commit)
        if code != ErrorCode.NONE:
            log.warning("markers of %s not written (%s); retried later", meta.transactional_id,
                        code.name)
            return code
        crash_point("after_markers")
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        code = await self._persist(meta, state=done, partitions=set(), start_ms=-1)
        if code == ErrorCode.NONE:
            metrics.TRANSACTIONS_ENDED.labels("commit" if commit else "abort").inc()
        return code

    async def _write_markers(self, meta: TxnMetadata, commit: bool) -> ErrorCode:
        shard = self.shards.get(self.partition_for(meta.transactional_id))
        coordinator_epoch = shard.partition.leader_epoch if shard is not None else 0
        now = now_ms()
        waits: list[tuple[str, int, asyncio.Future[None]]] = []
        elsewhere: list[TopicPartition] = []
        for topic, index in sorted(meta.partitions):
            try:
                partition = await self._host.local_partition(topic, index)
            except KafkaError as error:
                return error.code
            if partition is None:
                if self._host.topics.get(topic) is None:
                    continue    # the topic was deleted: nothing left to mark
                if self._write_elsewhere is None:
                    return ErrorCode.NOT_LEADER_OR_FOLLOWER     # retried
                elsewhere.append((topic, index))
                continue
            try:
                waits.append((topic, index, append_marker(
                    partition, meta.producer_id, meta.producer_epoch, commit,
                    coordinator_epoch, now)))
            except KafkaError as error:
                return error.code
        for topic, index, wait in waits:
            try:
                await asyncio.shield(wait)
            except KafkaError as error:
                return error.code
            if self._on_marker is not None:
                self._on_marker(topic, index, meta.producer_id, commit)
        if elsewhere:
            assert self._write_elsewhere is not None
            outcomes = await self._write_elsewhere(meta.producer_id, meta.producer_epoch,
                                                   commit, coordinator_epoch, elsewhere)
            for code in outcomes.values():
                if code not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                    return code     # retried; UNKNOWN: the topic was deleted meanwhile
        return ErrorCode.NONE

    # ------------------------------------------------------------------ timeouts
    def abort_timed_out(self, now: int | None = None) -> int:
        """Abort (with an epoch bump, fencing the producer) every transaction open longer
        than its timeout; finish those stuck in PrepareX. Returns how many were started."""
        now = now_ms() if now is None else now
        started = 0
        for meta in self.all_txns():
            if meta.lock.locked():
                continue
            if meta.state == TxnState.ONGOING and now - meta.start_ms > meta.timeout_ms:
                log.info("transaction %s (producer %d) timed out after %d ms: aborting",
                         meta.transactional_id, meta.producer_id, now - meta.start_ms)
                self.tasks.spawn(self._abort_expired(meta))
                started += 1
            elif meta.state in PREPARING:
                self.tasks.spawn(self._finish(meta))
                started += 1
        return started

    def remove_expired(self, now: int | None = None) -> int:
        """Forget transactional ids whose last transaction ended (or that never began one)
        longer than ``transactional.id.expiration.ms`` ago, as Kafka does: a tombstone in
        their partition. Returns how many removals were started."""
        now = now_ms() if now is None else now
        expiration = self.config.transactional_id_expiration_ms
        expired = [m for m in self.all_txns()
                   if not m.lock.locked() and m.update_ms >= 0
                   and m.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                   TxnState.COMPLETE_ABORT)
                   and now - m.update_ms > expiration]
        for meta in expired:
            self.tasks.spawn(self._remove(meta))
        return len(expired)

    async def _remove(self, meta: TxnMetadata) -> None:
        async with meta.lock:
            shard = self.shards.get(self.partition_for(meta.transactional_id))
            if shard is None or shard.txns.get(meta.transactional_id) is not meta or \
                    meta.state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                       TxnState.COMPLETE_ABORT):
                return
            if await self.durable(self._append(meta.transactional_id,
                                                [meta.transactional_id])) == ErrorCode.NONE:
                if shard.txns.get(meta.transactional_id) is meta:
                    del shard.txns[meta.transactional_id]
                log.info("transactional id %s expired (producer %d)", meta.transactional_id,
                         meta.producer_id)

    async def _abort_expired(self, meta: TxnMetadata) -> None:
        async with meta.lock:
            if meta.state == TxnState.ONGOING:
                await self._end(meta, commit=False, bump=True)
