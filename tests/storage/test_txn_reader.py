"""A reader elsewhere (a proxy, a broker answering for a partition it does not own) serves
read_committed from what the owner publishes: its LSO and aborted transactions equal the
owner's, whether it follows the owner's tails or only reads its state documents, and it never
reports an LSO past the first offset of a transaction still open."""

from __future__ import annotations

import json

from bmq.coordinators.transactions.records import marker_batch
from bmq.protocol.records import TRANSACTIONAL_FLAG
from bmq.storage import LogConfig, PartitionLog, Storage
from bmq.storage.log.aborted_index import CHUNK_ENTRIES, SUFFIX
from bmq.storage.log.published_txns import PublishedTxns
from bmq.storage.producer_state import ABORTED_KEY, CHUNKS_KEY, REMOVALS_KEY, AbortedTxn

from .batches import make_batch
from .helpers import append

# Checkpoints only when asked (the append layout); the object layout publishes every flush.
CONFIG = LogConfig(segment_bytes=4000, index_interval_bytes=200, retention_ms=-1,
                   publish_interval_ms=60_000)


def _txn_data(log: PartitionLog, pid: int, seq: int, flush: bool = True) -> int:
    base, _ = append(log, make_batch([b"t%d" % seq], producer_id=pid, producer_epoch=0,
                                     base_sequence=seq, attributes=TRANSACTIONAL_FLAG))
    if flush:
        log.flush()
    return base


def _plain(log: PartitionLog) -> None:
    append(log, make_batch([b"plain"]))
    log.flush()


def _marker(log: PartitionLog, pid: int, commit: bool, flush: bool = True) -> int:
    batch, header = marker_batch(pid, 0, commit, 0, 1_000, log.leader_epoch)
    base = log.append(memoryview(batch), [header], now_ms=1_000).base_offset
    if flush:
        log.flush()
    return base


def _same(reader: PartitionLog, owner: PartitionLog) -> None:
    assert reader.high_watermark == owner.high_watermark
    assert reader.last_stable_offset() == owner.last_stable_offset()
    assert reader.aborted_transactions(0, owner.high_watermark) == \
        owner.aborted_transactions(0, owner.high_watermark)


def test_a_reader_serves_the_owners_lso_and_aborted_transactions(storage: Storage) -> None:
    owner = PartitionLog.open(storage, "t", 0, CONFIG, epoch=1)
    tailing = PartitionLog.open_reader(storage, "t", 0, CONFIG)   # follows every tail
    late = PartitionLog.open_reader(storage, "t", 0, CONFIG)      # sees tails only later

    first = _txn_data(owner, 7, 0)             # producer 7 opens a transaction at 0
    _plain(owner)
    assert tailing.advance(owner.tail())
    _same(tailing, owner)
    assert tailing.last_stable_offset() == first == 0 < tailing.high_watermark

    second = _txn_data(owner, 8, 0)            # producer 8 opens one too
    aborted_at = _marker(owner, 7, commit=False)
    tailing.advance(owner.tail())
    _same(tailing, owner)
    assert tailing.last_stable_offset() == second     # 8's transaction is still open
    assert tailing.aborted_transactions(0, owner.high_watermark) == [
        AbortedTxn(7, first, aborted_at)]

    _marker(owner, 8, commit=True)
    owner.checkpoint()                          # the state document now holds the abort
    _txn_data(owner, 7, 1)
    _marker(owner, 7, commit=False)             # a second abort, after the checkpoint
    tailing.advance(owner.tail())
    _same(tailing, owner)
    assert len(tailing.aborted_transactions(0, owner.high_watermark)) == 2

    # A reader whose state document predates the tail's: it re-reads the state document for
    # the abort the tail no longer carries.
    late.advance(owner.tail())
    _same(late, owner)
    assert late.last_stable_offset() == owner.high_watermark

    # A reader that reads only state documents (no tails).
    owner.checkpoint()
    fresh = PartitionLog.open_reader(storage, "t", 0, CONFIG)
    _same(fresh, owner)
    for log in (tailing, late, fresh):
        log.close()
    owner.close()


def test_the_aborted_index_is_sealed_into_chunks_and_read_back(storage: Storage) -> None:
    """Many aborted transactions: the state document keeps only the newest entries and names
    chunk files for the rest; a reader, a new owner and retention all handle the chunks."""
    owner = PartitionLog.open(storage, "t", 0, CONFIG, epoch=1)
    aborts = 2500
    for i in range(aborts):
        _txn_data(owner, 1000 + i, 0, flush=False)
        _marker(owner, 1000 + i, commit=False, flush=False)
        if i % 100 == 99:
            owner.flush()
        if i % 600 == 599:
            owner.checkpoint()
    owner.checkpoint()
    everything = owner.aborted_transactions(0, owner.high_watermark)
    assert len(everything) == aborts
    state = json.loads(storage.read_all(owner.state_files.path(1)))
    chunks = state["producers"][CHUNKS_KEY]
    assert len(chunks) >= 2
    assert len(state["producers"].get(ABORTED_KEY, [])) < CHUNK_ENTRIES
    assert all(name.endswith(SUFFIX) and storage.exists(f"t/0/{name}") for name, _ in chunks)

    reader = PartitionLog.open_reader(storage, "t", 0, CONFIG)
    _same(reader, owner)
    owner.close()
    successor = PartitionLog.open(storage, "t", 0, CONFIG, epoch=2)
    assert successor.aborted_transactions(0, successor.high_watermark) == everything

    # Retention past the first chunk's entries deletes its file.
    first_name, first_end = chunks[0]
    successor.delete_records(first_end + 1)
    successor.apply_retention(0)
    assert not storage.exists(f"t/0/{first_name}")
    assert successor.aborted_transactions(0, successor.high_watermark) == \
        [a for a in everything if a.last_offset > first_end]
    reader.close()
    successor.close()


def test_a_reader_drops_entries_the_cleaner_removed() -> None:
    """The owner's cleaner removed aborted transactions with their ABORT markers: a reader
    rebuilds its index from the state document that says so, keeping what tails told past it,
    and a tail older than that document (kept by an idle partition's reader and applied again
    at each refresh) does not bring them back."""
    txns = PublishedTxns()
    removed, kept, newer = AbortedTxn(7, 0, 1), AbortedTxn(7, 2, 3), AbortedTxn(8, 11, 12)
    txns.apply_state({"high_watermark": 0, "producers": {}}, lambda name: [])
    old_tail = {"high_watermark": 4, "txn": {"lso": 4, "since": 0,
                                             "aborted": [list(removed), list(kept)]}}
    txns.apply_tail(old_tail)
    txns.apply_tail({"high_watermark": 13, "txn": {"lso": 13, "since": 0,
                                                   "aborted": [list(newer)]}})
    assert txns.aborted_between(0, 13) == [removed, kept, newer]
    txns.apply_state({"high_watermark": 10, "producers": {
        ABORTED_KEY: [list(kept)], REMOVALS_KEY: 1}}, lambda name: [])
    assert txns.aborted_between(0, 13) == [kept, newer]
    txns.apply_tail(old_tail)
    assert txns.aborted_between(0, 13) == [kept, newer]
