"""The log cleaner on a partition log, both layouts (files; objects on a local directory):
a full offset map spreads the work over passes, reads skip the gaps it leaves, the log start
offset stays, and a restart sees the cleaned log."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

import pytest

from bmq.cleaner import LogCleaner
from bmq.cleaner import cleaner as cleaner_module
from bmq.coordinators.transactions.records import marker_batch
from bmq.protocol.record_codec import Record, decode_batch, encode_batch
from bmq.protocol.records import TRANSACTIONAL_FLAG, BatchHeader, iter_batches
from bmq.storage import LocalStorage, LogConfig, PartitionLog, Storage
from bmq.storage.log import publication
from bmq.storage.log.aborted_index import SUFFIX as CHUNK_SUFFIX

from .batches import make_batch
from .conftest import make_storage
from .helpers import append, read_batches

CONFIG = LogConfig(segment_bytes=4096, retention_ms=-1, compact=True, delete_retention_ms=0,
                   index_interval_bytes=256)
NOW = 1_700_000_000_000


@pytest.fixture(params=["files", "objects"])
def cstorage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    if request.param == "s3":
        return make_storage("s3", tmp_path, request)
    store = LocalStorage(str(tmp_path / "data"))
    if request.param == "objects":
        store = copy.copy(store)
        store.supports_append = False
    return store


def _fill(log: PartitionLog, keys: int, rounds: int) -> dict[bytes, bytes | None]:
    last: dict[bytes, bytes | None] = {}
    for r in range(rounds):
        for k in range(keys):
            key = b"k%03d" % k
            value = None if (r == rounds - 1 and k % 5 == 0) else b"r%d-%d" % (r, k)
            batch, header = encode_batch([Record(0, NOW, key, value, [])])
            log.append(memoryview(batch), [header], NOW)
            last[key] = value
        log.flush()
    _filler(log)
    return last


def _filler(log: PartitionLog) -> None:
    """A full active segment (and, with objects, newest objects): what is before is sealed."""
    for i in range(60):
        batch, header = encode_batch([Record(0, NOW, b"filler", b"f" * 60, [])])
        log.append(memoryview(batch), [header], NOW)
        if i % 10 == 9:
            log.flush()
    log.flush()


def _records(log: PartitionLog) -> list[Record]:
    return [r for h, raw in read_batches(log) for r in decode_batch(raw, h)
            if r.key != b"filler"]


def test_a_small_offset_map_cleans_over_several_passes(cstorage: Storage) -> None:
    log = PartitionLog.open(cstorage, "t", 0, CONFIG, epoch=1)
    last = _fill(log, keys=40, rounds=5)
    cleaner = LogCleaner(16 * 24)   # 16 slots: 12 keys a pass
    assert cleaner.slots == 16
    passes = 0
    while cleaner.clean(log, NOW + 1) is not None:
        passes += 1
        assert passes < 100
    assert passes > 3
    # Tombstones go on the pass after their segment's first cleaning (delete.retention.ms 0).
    cleaner.clean(log, NOW + 2, force=True)
    records = _records(log)
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets))
    assert {r.key: r.value for r in records} == {k: v for k, v in last.items() if v is not None}
    assert log.log_start_offset == 0
    # A read from inside a gap starts at the next record.
    gap = next(o for o in range(offsets[-1]) if o not in offsets)
    first = read_batches(log, gap)[0][0]
    assert first.base_offset > gap
    log.close()
    reopened = PartitionLog.open(cstorage, "t", 0, CONFIG, epoch=1)
    assert [r.offset for r in _records(reopened)] == offsets
    reopened.close()


def _corrupt_state_documents(log: PartitionLog) -> None:
    """What a lost or damaged checkpoint (manifest) looks like to the next owner."""
    for epoch in log.state_files.epochs():
        log.storage.write_atomic(log.state_files.path(epoch), b'{"version": 2, "segm')


@pytest.mark.parametrize("cstorage", ["files", "objects", "s3"], indirect=True)
@pytest.mark.parametrize("originals", ["deleted", "left"])
def test_a_cleaned_log_survives_an_unreadable_checkpoint(cstorage: Storage, originals: str
                                                         ) -> None:
    """Recovery that lists the files instead of a checkpoint reads the cleaned segments (the
    originals are gone after ``file.delete.delay.ms``; before that both are there): every live
    key's last value, offsets growing, no record twice; the log goes on after."""
    log = PartitionLog.open(cstorage, "t", 0, CONFIG, epoch=1)
    last = _fill(log, keys=40, rounds=5)
    result = LogCleaner(1 << 20).clean(log, NOW + 1, force=True)
    assert result is not None and result.swapped and result.records_removed
    if originals == "deleted":
        assert log.delete_replaced(0) > 0
    cleaned = [r.offset for r in _records(log)]
    end = log.high_watermark
    log.close()
    _corrupt_state_documents(log)

    reopened = PartitionLog.open(cstorage, "t", 0, CONFIG, epoch=1)
    assert reopened.high_watermark == end
    records = _records(reopened)
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets))
    assert {r.key: r.value for r in records} == last
    if originals == "deleted":
        assert offsets == cleaned
    batch, header = encode_batch([Record(0, NOW, b"k000", b"after", [])])
    reopened.append(memoryview(batch), [header], NOW)
    reopened.flush()
    assert _records(reopened)[-1].offset == end
    reopened.close()


def test_an_unfinished_cleaned_segment_is_not_recovered(tmp_path: Path) -> None:
    """A cleaned segment file cut short by a crash mid-write (its index files, written last,
    missing) is not taken for the originals it would have replaced."""
    store = LocalStorage(str(tmp_path / "data"))
    log = PartitionLog.open(store, "t", 0, CONFIG, epoch=1)
    last = _fill(log, keys=40, rounds=5)
    before = [r.offset for r in _records(log)]
    result = LogCleaner(1 << 20).clean(log, NOW + 1, force=True)
    assert result is not None
    log.close()
    _corrupt_state_documents(log)
    for name in store.list(log.dir):
        stem = name.rsplit(".", 1)[0]
        if name.endswith(".log") and stem.count("-") == 2:   # the cleaner's segments
            path = f"{log.dir}/{name}"
            store.truncate(path, store.size(path) // 2)
            store.delete(f"{log.dir}/{stem}.index")
            store.delete(f"{log.dir}/{stem}.timeindex")
    reopened = PartitionLog.open(store, "t", 0, CONFIG, epoch=1)
    records = _records(reopened)
    assert [r.offset for r in records] == before
    assert {r.key: r.value for r in records} == last
    reopened.close()


def _batches(log: PartitionLog) -> list[tuple[BatchHeader, bytes]]:
    """Every batch from the log start, markers included (which ``read_batches`` refuses)."""
    out: list[tuple[BatchHeader, bytes]] = []
    offset = log.log_start_offset
    while offset < log.high_watermark:
        data = bytes(log.read(offset, 1 << 20))
        assert data, f"empty read at {offset}"
        for pos, header in iter_batches(data):
            out.append((header, data[pos:pos + header.size]))
            offset = header.next_offset
    return out


def _markers(log: PartitionLog) -> list[tuple[int, int]]:
    """(producer id, control type: 0 ABORT, 1 COMMIT) of each marker left in the log."""
    markers = []
    for header, raw in _batches(log):
        if header.is_control:
            key = decode_batch(raw, header)[0].key
            assert key is not None
            markers.append((header.producer_id, int.from_bytes(key[2:4], "big")))
    return markers


def _txn(log: PartitionLog, seq: dict[int, int], pid: int, key: bytes, value: bytes,
         commit: bool) -> int:
    """A transaction of one record, then its marker; returns the marker's offset."""
    append(log, make_batch([value], key=key, producer_id=pid, producer_epoch=0,
                           base_sequence=seq.get(pid, 0), attributes=TRANSACTIONAL_FLAG),
           now_ms=NOW)
    seq[pid] = seq.get(pid, 0) + 1
    batch, header = marker_batch(pid, 0, commit, 0, NOW, log.leader_epoch)
    offset = log.append(memoryview(batch), [header], NOW).base_offset
    log.flush()
    return offset


def test_markers_go_once_their_transaction_has_no_data_left(cstorage: Storage) -> None:
    """Kafka's rule: a transaction marker is removed (its segment past
    ``delete.retention.ms``) once the pass finds no data of its transaction: a COMMIT marker
    whose transaction still has a record stays, an ABORT marker goes (its records went in the
    first pass) and its aborted-transaction index entry with it."""
    log = PartitionLog.open(cstorage, "t", 0, CONFIG, epoch=1)
    seq: dict[int, int] = {}
    _txn(log, seq, 100, b"a", b"a1", commit=True)     # overwritten below: its marker can go
    _txn(log, seq, 200, b"b", b"b1", commit=False)    # aborted: data, then marker removed
    _txn(log, seq, 100, b"a", b"a2", commit=True)     # the live value: its marker stays
    _filler(log)
    assert len(log.aborted_transactions(0, log.high_watermark)) == 1
    cleaner = LogCleaner(1 << 20)
    first = cleaner.clean(log, NOW + 1, force=True)
    assert first is not None and first.markers_removed == 0   # markers wait as tombstones do
    assert _markers(log) == [(100, 1), (200, 0), (100, 1)]
    assert len(log.aborted_transactions(0, log.high_watermark)) == 1
    second = cleaner.clean(log, NOW + 2)   # due: a marker waits for delete.retention.ms (0)
    assert second is not None and second.markers_removed == 2
    assert _markers(log) == [(100, 1)]
    assert log.aborted_transactions(0, log.high_watermark) == []
    assert [(r.key, r.value) for h, raw in _batches(log) if not h.is_control
            for r in decode_batch(raw, h) if r.key in (b"a", b"b")] == [(b"a", b"a2")]
    assert log.last_stable_offset() == log.high_watermark
    third = cleaner.clean(log, NOW + 3, force=True)
    assert third is not None and third.markers_removed == 0
    log.close()
    reopened = PartitionLog.open(cstorage, "t", 0, CONFIG, epoch=1)
    assert reopened.aborted_transactions(0, reopened.high_watermark) == []
    reopened.close()


def _chunk_files(log: PartitionLog) -> set[str]:
    return {n for n in log.storage.list(log.dir) if n.endswith(CHUNK_SUFFIX)}


# Checkpoints (and, on files, chunks of the aborted-transaction index) only when asked.
CHECKPOINTED = replace(CONFIG, publish_interval_ms=60_000)


def _aborts_in_chunks(log: PartitionLog) -> tuple[list[int], list[int]]:
    """Aborted transactions of one producer, sealed (CHUNK_ENTRIES 2) in chunk [early 0,
    early 1], then chunk [early 2, late 0] (objects seal when a flush finds two unsealed
    entries, files at a checkpoint), then late 1 not sealed; then a commit of the same
    producer. The late ones follow a transaction left open: the cleaner stops before it (the
    last stable offset). Returns the marker offsets, early and late."""
    seq: dict[int, int] = {}

    def abort(value: bytes) -> int:
        return _txn(log, seq, 200, b"b", value, commit=False)
    early = [abort(b"e0"), abort(b"e1")]
    log.checkpoint()
    early.append(abort(b"e2"))
    _filler(log)
    append(log, make_batch([b"open"], key=b"o", producer_id=300, producer_epoch=0,
                           base_sequence=0, attributes=TRANSACTIONAL_FLAG), now_ms=NOW)
    late = [abort(b"l0")]
    log.checkpoint()
    late.append(abort(b"l1"))
    _txn(log, seq, 200, b"c", b"c1", commit=True)
    log.checkpoint()
    chunks = _chunk_files(log)
    assert chunks == {name for name, _end in log.durable_producers.sealed}
    assert len(chunks) == 2
    return early, late


@pytest.mark.parametrize("cstorage", ["files", "objects", "s3"], indirect=True)
def test_abort_markers_leave_the_sealed_index_and_readers_elsewhere(
        cstorage: Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries sealed in chunk files go with their markers: a chunk losing some is written
    again under a new name, one losing all is no longer named, and the old files are deleted
    after ``file.delete.delay.ms``. A reader elsewhere drops them too, also one that saw a
    tail from before the swap; a restart sees the same index."""
    monkeypatch.setattr(publication, "CHUNK_ENTRIES", 2)
    config = CHECKPOINTED
    log = PartitionLog.open(cstorage, "t", 0, config, epoch=1)
    reader = PartitionLog.open_reader(cstorage, "t", 0, config)
    early, late = _aborts_in_chunks(log)
    chunks = _chunk_files(log)
    everything = log.aborted_transactions(0, log.high_watermark)
    assert [a.last_offset for a in everything] == early + late
    assert reader.refresh() and reader.aborted_transactions(0, log.high_watermark) == everything

    cleaner = LogCleaner(1 << 20)
    cleaner.clean(log, NOW + 1, force=True)      # the aborted records go, the markers wait
    assert log.aborted_transactions(0, log.high_watermark) == everything
    assert reader.advance(log.tail()) or reader.refresh()
    before_swap = log.tail()
    reader.advance(before_swap)
    second = cleaner.clean(log, NOW + 2)
    assert second is not None and second.markers_removed == len(early)
    left = [a for a in everything if a.last_offset in late]
    assert log.aborted_transactions(0, log.high_watermark) == left
    assert [m for m in _markers(log) if m[1] == 0] == [(200, 0)] * len(late)
    named = {name for name, _end in log.durable_producers.sealed}
    assert len(named) == 1 and not named & chunks
    assert _chunk_files(log) == named | chunks   # the old ones until file.delete.delay.ms
    assert log.delete_replaced(0) > len(chunks)
    assert _chunk_files(log) == named

    assert reader.refresh()
    assert reader.aborted_transactions(0, log.high_watermark) == left
    reader.advance(before_swap)   # a tail older than the swap does not bring them back
    assert reader.aborted_transactions(0, log.high_watermark) == left
    fresh = PartitionLog.open_reader(cstorage, "t", 0, config)
    assert fresh.aborted_transactions(0, log.high_watermark) == left
    log.close()
    reopened = PartitionLog.open(cstorage, "t", 0, config, epoch=2)
    assert reopened.aborted_transactions(0, reopened.high_watermark) == left
    reopened.close()
    for view in (reader, fresh):
        view.close()


class _Killed(Exception):
    """Stands for a kill -9 at a step of a cleaning pass."""


@pytest.mark.parametrize("step", ["chunks written", "swapped"])
def test_a_crash_while_removing_abort_markers(cstorage: Storage, step: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass removing ABORT markers stopped after it wrote the new chunk files (its state
    document write fails) or after its swap: the next owner has the old segments with the old
    index or the new with the new, no chunk file left that its state document does not name,
    and its own pass removes what is left to remove."""
    monkeypatch.setattr(publication, "CHUNK_ENTRIES", 2)
    log = PartitionLog.open(cstorage, "t", 0, CHECKPOINTED, epoch=1)
    _early, late = _aborts_in_chunks(log)
    everything = log.aborted_transactions(0, log.high_watermark)
    left = [a for a in everything if a.last_offset in late]
    cleaner = LogCleaner(1 << 20)
    cleaner.clean(log, NOW + 1, force=True)

    def kill(*_args: object) -> None:
        raise _Killed
    if step == "swapped":
        monkeypatch.setattr(cleaner_module, "crash_point",
                            lambda name: kill() if name == step else None)
    else:
        monkeypatch.setattr(log.state_files, "write", kill)
    with pytest.raises(_Killed):
        cleaner.clean(log, NOW + 2)
    log.abandon()

    reopened = PartitionLog.open(cstorage, "t", 0, CHECKPOINTED, epoch=1)
    index = everything if step == "chunks written" else left
    assert reopened.aborted_transactions(0, reopened.high_watermark) == index
    assert len([m for m in _markers(reopened) if m[1] == 0]) == len(index)
    cleaner.clean(reopened, NOW + 3)
    assert reopened.aborted_transactions(0, reopened.high_watermark) == left
    assert [m for m in _markers(reopened) if m[1] == 0] == [(200, 0)] * len(late)
    reopened.delete_replaced(0)
    reopened.merge_objects()   # (objects: garbage is collected at the first merge)
    assert _chunk_files(reopened) == {name for name, _ in reopened.durable_producers.sealed}
    reopened.close()


def test_merging_objects_keeps_the_tombstone_clock(tmp_path: Path) -> None:
    """On the object layout, small objects are merged; a cleaned object merged with newer,
    uncleaned ones would count as never cleaned, and its tombstones would wait for another
    cleaning plus delete.retention.ms. Cleaned objects merge among themselves only."""
    store = copy.copy(LocalStorage(str(tmp_path / "data")))
    store.supports_append = False
    log = PartitionLog.open(store, "t", 0, replace(CONFIG, delete_retention_ms=1000), epoch=1)
    last = _fill(log, keys=10, rounds=2)
    cleaner = LogCleaner(1 << 20)
    assert cleaner.clean(log, NOW + 1) is not None
    deleted = {k for k, v in last.items() if v is None}
    assert deleted and deleted <= {r.key for r in _records(log) if r.value is None}
    first_new = log.log_end_offset
    for k in range(40, 50):      # newer small objects after the cleaned ones, then sealed
        batch, header = encode_batch([Record(0, NOW, b"k%03d" % k, b"new", [])])
        log.append(memoryview(batch), [header], NOW)
        log.flush()
    _filler(log)
    assert log.merge_objects() > 0
    cleaned = [seg for seg in log.segments.by_offset if seg.cleaned_ms >= 0]
    assert cleaned and all(seg.next_offset <= first_new for seg in cleaned)
    # delete.retention.ms after the first cleaning, the tombstones go.
    cleaner.clean(log, NOW + 1 + 1000, force=True)
    assert not [r.key for r in _records(log) if r.value is None]
    log.close()
