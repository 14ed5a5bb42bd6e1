"""KIP-890 part 1's verification guard on a partition's owner: a transactional batch the
coordinator (on another broker) verified while its transaction was ongoing, but that reaches the
append only after the transaction's marker, is refused.

Found by the fault runs (tests/faults, list-append, G1a): a batch a proxy forwarded late was
verified, the client's abort wrote its ABORT marker meanwhile, and the batch was appended after
the marker; the producer's next transaction on the partition then committed it."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import pytest

from bmq.broker.handlers.produce import check_transactional
from bmq.coordinators.transactions.core import append_marker
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.records import validate_batches
from bmq.storage import LocalStorage, LogConfig, PartitionLog
from bmq.writepath.partitions import Partition
from tests.integration.kwire import Record, build_record_batch

PID, EPOCH, TP = 7, 0, ("t", 0)


def _headers(sequence: int) -> Any:
    batch = build_record_batch([Record(b"k", b"v")], attributes=0x10, producer_id=PID,
                               producer_epoch=EPOCH, base_sequence=sequence)
    return validate_batches(memoryview(bytearray(batch)), 1 << 20)


def _check(partition: Partition, verdict: tuple[ErrorCode, object]) -> ErrorCode:
    try:
        check_transactional(cast(Any, None), partition, "txn", _headers(0), TP, {TP: verdict})
    except KafkaError as error:
        return error.code
    return ErrorCode.NONE


def test_a_marker_after_the_coordinators_answer_voids_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        with ThreadPoolExecutor(1) as executor:
            log = PartitionLog.open(LocalStorage(str(tmp_path)), *TP, LogConfig(), epoch=1)
            partition = Partition(log, executor, 1)
            guard = partition.start_verification(PID)
            assert partition.start_verification(PID) is guard   # one per producer
            assert _check(partition, (ErrorCode.NONE, guard)) == ErrorCode.NONE
            # The coordinator answered "ongoing"; then the transaction's ABORT marker came.
            await append_marker(partition, PID, EPOCH, False, 0, 0)
            assert _check(partition, (ErrorCode.NONE, guard)) == ErrorCode.INVALID_TXN_STATE
            # A verification asked after the marker is judged on its own answer.
            fresh = partition.start_verification(PID)
            assert _check(partition, (ErrorCode.NONE, fresh)) == ErrorCode.NONE
            assert _check(partition, (ErrorCode.INVALID_TXN_STATE, fresh)) == \
                ErrorCode.INVALID_TXN_STATE
            log.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("code", [ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.NOT_ENOUGH_REPLICAS])
def test_the_coordinators_refusal_stands(tmp_path: Path, code: ErrorCode) -> None:
    async def scenario() -> None:
        with ThreadPoolExecutor(1) as executor:
            log = PartitionLog.open(LocalStorage(str(tmp_path)), *TP, LogConfig(), epoch=1)
            partition = Partition(log, executor, 1)
            assert _check(partition, (code, partition.start_verification(PID))) == code
            log.close()

    asyncio.run(scenario())
