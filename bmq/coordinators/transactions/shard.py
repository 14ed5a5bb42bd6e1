"""One partition of ``__transaction_state`` and the transactions whose state it stores.

Writes go through the partition's group-commit writer like any coordinator's; a replay keeps
the last value per transactional id, which is all the log cleaner keeps of a compacted log
(the topic is created ``cleanup.policy=compact``, as Kafka's).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor

from bmq.coordinators.replay import batch_records, log_batches
from bmq.coordinators.sharded import append_records
from bmq.coordinators.transactions.records import (
    TxnMetadata,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from bmq.protocol.errors import ErrorCode
from bmq.protocol.primitives import DecodeError
from bmq.storage import PartitionLog
from bmq.writepath.partitions import Partition

log = logging.getLogger(__name__)


def replay(log_: PartitionLog) -> dict[str, TxnMetadata]:
    """The last state of every transactional id in the partition (on a worker thread)."""
    found: dict[str, TxnMetadata] = {}
    for header, batch, start in log_batches(log_):
        if header.is_control:
            continue
        for record in batch_records(log_, header, batch, start):
            try:
                key = decode_key(record.key) if record.key is not None else None
                if key is None:
                    continue
                if record.value is None:
                    found.pop(key, None)
                else:
                    found[key] = decode_value(key, record.value)
            except (DecodeError, ValueError) as error:
                log.error("%s: record at offset %d skipped: %s", log_, record.offset, error)
    return found


class TxnShard:
    """The transactions stored on one ``__transaction_state`` partition."""

    def __init__(self, index: int, partition: Partition, executor: Executor) -> None:
        self.index = index
        self.partition = partition
        self.txns: dict[str, TxnMetadata] = {}
        self._executor = executor

    def __repr__(self) -> str:
        return f"<TxnShard {self.index} transactions={len(self.txns)}>"

    async def load(self) -> None:
        loop = asyncio.get_running_loop()
        self.txns = await loop.run_in_executor(self._executor, replay, self.partition.log)
        if self.txns:
            log.info("loaded %d transactional ids from transaction state partition %d",
                     len(self.txns), self.index)

    def close(self) -> None:
        """Nothing runs per shard (the coordinator's timer walks every shard)."""

    def write(self, entries: list[TxnMetadata | str]) -> asyncio.Future[None]:
        """Append the states of ``entries``; a bare transactional id is a tombstone (the id
        is forgotten, as ``replay`` reads it)."""
        return append_records(
            self.partition,
            [(encode_key(m), None) if isinstance(m, str)
             else (encode_key(m.transactional_id), encode_value(m)) for m in entries],
            coordinator_error)[0]


def coordinator_error(code: ErrorCode) -> ErrorCode:
    """How a failed write to the transaction log reaches clients (Kafka's mapping)."""
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR,
                ErrorCode.NOT_COORDINATOR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return ErrorCode.COORDINATOR_NOT_AVAILABLE if code != ErrorCode.NONE else code
