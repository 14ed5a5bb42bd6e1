"""The transaction part of a partition's producer state (open transactions, the aborted
index), as the checkpoint keeps it, and the markers the coordinator writes."""

from __future__ import annotations

from bmq.coordinators.transactions.records import marker_batch
from bmq.protocol.records import HEADER_SIZE, crc_ok
from bmq.storage.producer_state import (
    TXN_ABORT,
    TXN_COMMIT,
    TXN_DATA,
    AbortedTxn,
    ProducerStateTable,
    txn_kind,
)

PID = 42


def _data(table: ProducerStateTable, offset: int, seq: int, epoch: int = 0) -> None:
    table.record(PID, epoch, seq, seq, offset, offset, 0, 0, TXN_DATA)


def test_open_commit_abort_and_the_checkpoint_round_trip():
    table = ProducerStateTable()
    _data(table, 5, 0)
    _data(table, 6, 1)
    assert table.first_unstable_offset() == 5
    table.record(PID, 0, -1, -1, 7, 7, 0, 0, TXN_COMMIT)
    assert table.first_unstable_offset() is None and table.aborted == []
    _data(table, 10, 2)
    table.record(PID, 0, -1, -1, 12, 12, 0, 0, TXN_ABORT)
    table.record(PID, 0, -1, -1, 13, 13, 0, 0, TXN_ABORT)    # written again after a crash
    assert table.aborted == [AbortedTxn(PID, 10, 12)]
    assert table.aborted_between(0, 11) == [AbortedTxn(PID, 10, 12)]
    assert table.aborted_between(13, 20) == []
    _data(table, 20, 3)
    restored = ProducerStateTable.from_json(table.to_json())
    assert restored.aborted == table.aborted
    assert restored.first_unstable_offset() == 20
    restored.truncate(11)          # the log lost its tail: so does the index
    assert restored.aborted == [] and restored.first_unstable_offset() is None


def test_a_marker_of_a_higher_epoch_ends_the_transaction_and_fences():
    table = ProducerStateTable()
    _data(table, 0, 0)
    table.record(PID, 1, -1, -1, 3, 3, 0, 0, TXN_ABORT)     # the coordinator's timeout abort
    assert table.aborted == [AbortedTxn(PID, 0, 3)]
    assert table.producers[PID].epoch == 1


def test_marker_batches_are_kafka_control_batches():
    for commit, kind in ((True, TXN_COMMIT), (False, TXN_ABORT)):
        batch, header = marker_batch(PID, 3, commit, 0, 1_700_000_000_000, 0)
        assert header.is_control and header.producer_id == PID and header.producer_epoch == 3
        assert crc_ok(batch, 0, header)
        assert txn_kind(header, memoryview(batch)[HEADER_SIZE:]) == kind
