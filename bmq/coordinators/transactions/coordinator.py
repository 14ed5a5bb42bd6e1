"""The transaction coordinator's requests: InitProducerId (with a transactional id),
AddPartitionsToTxn (and its verify-only form, KIP-890 part 1), AddOffsetsToTxn, EndTxn, and
what Produce asks to verify a transactional batch; DescribeTransactions and ListTransactions
read the state.

Epochs and fencing follow Kafka: InitProducerId bumps the epoch (a new producer instance with
the same transactional id fences the old one, whose requests then get PRODUCER_FENCED, or
INVALID_PRODUCER_EPOCH at request versions older than KIP-588's); an open transaction found by
InitProducerId is aborted first. KIP-360: a producer that sends its current id and epoch gets
the next epoch of the same id; a retried InitProducerId gets the same answer again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import Executor
from typing import NamedTuple

from bmq.coordinators.base import CoordinatorHost
from bmq.coordinators.transactions.core import (
    MarkerListener,
    RemoteMarkerWriter,
    TxnCoordinatorCore,
)
from bmq.coordinators.transactions.records import (
    PREPARING,
    TxnMetadata,
    TxnState,
)
from bmq.metadata.topics import TopicPartition
from bmq.protocol.errors import ErrorCode
from bmq.writepath.partitions import now_ms

log = logging.getLogger(__name__)

COMPLETE = (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


class ProducerIdAndEpoch(NamedTuple):
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


class TransactionCoordinator(TxnCoordinatorCore):
    """Every transactional id of the ``__transaction_state`` partitions this broker owns."""

    def __init__(self, host: CoordinatorHost, executor: Executor,
                 allocate_producer_id: Callable[[], Awaitable[int]],
                 on_marker: MarkerListener | None = None,
                 write_elsewhere: RemoteMarkerWriter | None = None) -> None:
        super().__init__(host, executor, on_marker, write_elsewhere)
        self._allocate = allocate_producer_id

    # ------------------------------------------------------------------ InitProducerId
    async def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int,
                               producer_epoch: int) -> ProducerIdAndEpoch:
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return ProducerIdAndEpoch(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        await self.ensure_started()
        error = self.shard_error(transactional_id)
        if error != ErrorCode.NONE:
            return ProducerIdAndEpoch(error)
        meta = self.txn(transactional_id)
        if meta is None:
            new_id = await self._allocate()
            meta = self.txn(transactional_id)    # (made by a concurrent request meanwhile?)
            if meta is None:
                meta = TxnMetadata(transactional_id, new_id, -1, timeout_ms)
                self.shards[self.partition_for(transactional_id)].txns[transactional_id] = meta
        async with meta.lock:
            if not self._active_shard(meta):     # expired or unloaded while we waited
                return ProducerIdAndEpoch(ErrorCode.CONCURRENT_TRANSACTIONS)
            if producer_id >= 0:
                if producer_id == meta.producer_id and producer_epoch == meta.last_epoch:
                    # A retry of the InitProducerId that bumped the epoch: the same answer.
                    return ProducerIdAndEpoch(ErrorCode.NONE, meta.producer_id,
                                              meta.producer_epoch)
                if producer_id != meta.producer_id or producer_epoch != meta.producer_epoch:
                    return ProducerIdAndEpoch(ErrorCode.PRODUCER_FENCED)
            if meta.state in PREPARING:
                return ProducerIdAndEpoch(ErrorCode.CONCURRENT_TRANSACTIONS)
            if meta.state == TxnState.ONGOING:
                # The previous instance left a transaction open: abort it, fencing it.
                code = await self._end(meta, commit=False, bump=True)
                if code != ErrorCode.NONE:
                    return ProducerIdAndEpoch(code)
                if meta.state in PREPARING:     # its markers are still being written
                    return ProducerIdAndEpoch(ErrorCode.CONCURRENT_TRANSACTIONS)
            changes: dict[str, object]
            if meta.producer_epoch >= 32766:
                changes = {"producer_id": await self._allocate(),
                           "producer_epoch": 0, "last_epoch": -1}
            else:
                changes = self._bumped(meta)
            code = await self._persist(meta, state=TxnState.EMPTY, partitions=set(),
                                       timeout_ms=timeout_ms, start_ms=-1, **changes)
            if code != ErrorCode.NONE:
                return ProducerIdAndEpoch(code)
            return ProducerIdAndEpoch(ErrorCode.NONE, meta.producer_id, meta.producer_epoch)

    # ------------------------------------------------------------------ checks
    def _check_producer(self, transactional_id: str, producer_id: int,
                        producer_epoch: int) -> tuple[ErrorCode, TxnMetadata | None]:
        error = self.shard_error(transactional_id)
        if error != ErrorCode.NONE:
            return error, None
        meta = self.txn(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if producer_epoch != meta.producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        return ErrorCode.NONE, meta

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partition: TopicPartition) -> ErrorCode:
        """Produce's check (KIP-890 part 1): may this producer write a transactional batch
        to ``partition`` now? Only if it was added to the producer's ongoing transaction."""
        error, meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if error == ErrorCode.PRODUCER_FENCED:
            return ErrorCode.INVALID_PRODUCER_EPOCH     # Produce's code for a fenced epoch
        if meta is None:
            return error
        if meta.state != TxnState.ONGOING or partition not in meta.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    # ------------------------------------------------------------------ AddPartitions
    async def add_partitions(self, transactional_id: str, producer_id: int,
                             producer_epoch: int, partitions: Iterable[TopicPartition],
                             verify_only: bool = False) -> dict[TopicPartition, ErrorCode]:
        asked = list(dict.fromkeys(partitions))
        error, meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return dict.fromkeys(asked, error)
        if verify_only:
            ok = meta.state == TxnState.ONGOING
            return {tp: ErrorCode.NONE if ok and tp in meta.partitions
                    else ErrorCode.INVALID_TXN_STATE for tp in asked}
        unknown = {tp for tp in asked if not self._exists(tp)}
        if unknown:
            return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                    else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in asked}
        async with meta.lock:
            if not self._active_shard(meta):     # expired or unloaded while we waited
                return dict.fromkeys(asked, ErrorCode.CONCURRENT_TRANSACTIONS)
            if meta.producer_epoch != producer_epoch:   # fenced while waiting for the lock
                return dict.fromkeys(asked, ErrorCode.PRODUCER_FENCED)
            if meta.state in PREPARING:
                return dict.fromkeys(asked, ErrorCode.CONCURRENT_TRANSACTIONS)
            if meta.state == TxnState.ONGOING and meta.partitions.issuperset(asked):
                return dict.fromkeys(asked, ErrorCode.NONE)
            changes: dict[str, object] = {"state": TxnState.ONGOING,
                                          "partitions": meta.partitions | set(asked)}
            if meta.state != TxnState.ONGOING:
                changes["start_ms"] = now_ms()
            code = await self._persist(meta, **changes)
        return dict.fromkeys(asked, code)

    def _exists(self, tp: TopicPartition) -> bool:
        info = self._host.topics.get(tp[0])
        return info is not None and 0 <= tp[1] < info.partitions

    # ------------------------------------------------------------------ EndTxn
    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool) -> ErrorCode:
        error, meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return error
        async with meta.lock:
            if not self._active_shard(meta):     # expired or unloaded while we waited
                return ErrorCode.CONCURRENT_TRANSACTIONS
            if meta.producer_epoch != producer_epoch:
                return ErrorCode.PRODUCER_FENCED
            if meta.state == TxnState.ONGOING:
                return await self._end(meta, commit)
            if meta.state in COMPLETE and (meta.state == TxnState.COMPLETE_COMMIT) == commit:
                return ErrorCode.NONE      # a retry of the EndTxn that completed it
            if meta.state in PREPARING:
                return ErrorCode.CONCURRENT_TRANSACTIONS
            return ErrorCode.INVALID_TXN_STATE

    # ------------------------------------------------------------------ admin
    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnMetadata | None]:
        error = self.shard_error(transactional_id)
        if error != ErrorCode.NONE:
            return error, None
        meta = self.txn(transactional_id)
        if meta is None:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, meta

