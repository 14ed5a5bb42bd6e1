"""The transaction part of a partition's producer state (open transactions, the aborted
index), as the checkpoint keeps it, and the markers the coordinator writes."""

from __future__ import annotations

from random import Random

from hypothesis import given
from hypothesis import strategies as st

from bmq.coordinators.transactions.records import marker_batch
from bmq.protocol.records import HEADER_SIZE, crc_ok
from bmq.storage.log.published_txns import PublishedTxns, tail_txn_state
from bmq.storage.producer_state import (
    TXN_ABORT,
    TXN_COMMIT,
    TXN_DATA,
    AbortedTxn,
    ProducerStateTable,
    aborted_between,
    aborted_from,
    marker_order,
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


# An aborted-transaction index as a partition makes it: transactions of a few producers,
# interleaved (first offsets in no order), each ended by its ABORT marker at a new offset.
@st.composite
def _index(draw: st.DrawFn) -> list[AbortedTxn]:
    entries, offset = [], 0
    for _ in range(draw(st.integers(0, 60))):
        offset += draw(st.integers(1, 20))
        entries.append(AbortedTxn(draw(st.integers(0, 5)),
                                  offset - draw(st.integers(0, 100)), offset))
    return entries


@given(_index(), st.integers(-10, 700), st.integers(-10, 700), st.integers(-10, 700))
def test_bisected_index_lookups_match_a_scan(aborted: list[AbortedTxn], start: int, end: int,
                                             since: int) -> None:
    """The index is by marker offset, and the lookups that bisect it find what a full scan
    finds (a transaction's first offset is in no order, so the upper bound is a filter)."""
    assert aborted == sorted(aborted, key=marker_order)
    assert aborted_between(aborted, start, end) == [
        a for a in aborted if a.last_offset >= start and a.first_offset < end]
    assert aborted_from(aborted, start) == [a for a in aborted if a.last_offset >= start]
    table = ProducerStateTable()
    table.aborted = aborted
    txn = tail_txn_state(table, 1000, since)
    assert (txn is None) == (not aborted)
    if txn is not None:
        assert txn["aborted"] == [list(a) for a in aborted if a.last_offset >= since]


@given(_index(), st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=6),
       st.randoms(use_true_random=False))
def test_a_reader_merges_chunks_and_tails_in_any_order(
        aborted: list[AbortedTxn], pieces: list[tuple[int, int]], rnd: Random) -> None:
    """Whatever overlapping slices of the owner's index a reader is given (chunks read late,
    tails sending entries again, shuffled), it holds each entry once, by marker offset."""
    reader = PublishedTxns()
    seen: set[AbortedTxn] = set()
    for low, high in pieces:
        piece = aborted[min(low, high):max(low, high)]
        rnd.shuffle(piece)
        seen.update(piece)
        reader.apply_tail({"high_watermark": 0, "txn": {
            "lso": 0, "since": 0, "aborted": [list(a) for a in piece + piece[:2]]}})
        assert reader.aborted == sorted(seen, key=marker_order)
