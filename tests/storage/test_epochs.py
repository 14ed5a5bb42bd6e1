"""Leader epochs: one writer per partition, stale owners fenced, read-only views.

Run on every storage kind of ``conftest.STORAGE_KINDS`` (and on SeaweedFS S3 by
tests/storage_s3, which imports these tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.storage import FencedEpochError, LocalStorage, LogConfig, PartitionLog, Storage

from .batches import make_batch, request, sized_batch, split, tag_of, with_offset
from .helpers import append, read_batches

CONFIG = LogConfig(segment_bytes=4000, index_interval_bytes=200, retention_ms=-1,
                   publish_interval_ms=0)


def _open(storage: Storage, epoch: int, config: LogConfig = CONFIG) -> PartitionLog:
    return PartitionLog.open(storage, "t", 0, config, epoch=epoch)


def _write(log: PartitionLog, tags: range, size: int = 700) -> list[bytes]:
    """Append one batch per tag, flushing every three; return the batches as stored."""
    stored = []
    for i, tag in enumerate(tags):
        b = sized_batch(size, tag)
        base, _ = append(log, b)
        stored.append(with_offset(b, base))
        if i % 3 == 2:
            log.flush()
    log.flush()
    return stored


def _raw(log: PartitionLog) -> list[bytes]:
    return [raw for _, raw in read_batches(log)]


def _reader_raw(storage: Storage) -> list[bytes]:
    reader = PartitionLog.open_reader(storage, "t", 0, CONFIG)
    try:
        out = []
        offset = reader.log_start_offset
        while offset < reader.high_watermark:
            data = bytes(reader.read(offset, 1 << 20))
            pos = 0
            for header in split(data):
                out.append(data[pos:pos + header.size])
                pos += header.size
                offset = header.next_offset
        return out
    finally:
        reader.close()


def _disable_fence_check(log: PartitionLog) -> None:
    """Simulate the race in which a stale owner's check still saw itself as the newest (or an
    owner that never checks): everything it does afterwards must stay invisible anyway."""
    log.fence_check = lambda: None  # type: ignore[method-assign]


def test_takeover_fences_the_stale_owner(storage: Storage) -> None:
    a = _open(storage, 1)
    assert a.leader_epoch == 1
    stored = _write(a, range(0, 10))
    b = _open(storage, 2)
    assert b.leader_epoch == 2
    assert _raw(b) == stored and b.high_watermark == 10

    # The stale owner's next flush notices the new epoch and fails; nothing is acknowledged.
    append(a, sized_batch(700, 100))
    with pytest.raises(FencedEpochError) as fenced:
        a.flush()
    # A KafkaError like any other (callers catching KafkaError see it), which also says which
    # epoch fenced it, so that a controller can assign one above.
    assert isinstance(fenced.value, KafkaError)
    assert fenced.value.code == ErrorCode.FENCED_LEADER_EPOCH
    assert fenced.value.current_epoch == 2
    assert fenced.value.message == f"{a}: epoch 1 fenced by 2"
    with pytest.raises(KafkaError):
        append(a, sized_batch(700, 101))

    # Opening with an older epoch again is refused.
    for old in (0, 1):
        with pytest.raises(FencedEpochError) as fenced:
            _open(storage, old)
        assert fenced.value.code == ErrorCode.FENCED_LEADER_EPOCH
        assert fenced.value.current_epoch == 2
        assert str(fenced.value).endswith(f": epoch {old} is older than the current 2")

    stored += _write(b, range(10, 20))
    assert _raw(b) == stored
    assert _reader_raw(storage) == stored
    b.close()
    c = _open(storage, 3)
    assert _raw(c) == stored
    c.close()
    a._shut()


def test_stale_owner_writing_on_is_never_visible(storage: Storage) -> None:
    a = _open(storage, 1)
    stored = _write(a, range(0, 10))
    b = _open(storage, 2)
    assert _raw(b) == stored
    # A wakes up from a long pause and goes on as if it were still the owner: appends,
    # flushes (rolling segments or writing objects), checkpoints.
    _disable_fence_check(a)
    stale = _write(a, range(500, 520))
    a.checkpoint()
    assert a.high_watermark == 30 and len(_raw(a)) == 30   # A believes it wrote them

    # Nothing of it is visible: not to B, not to a reader, not to the next owner.
    assert b.high_watermark == 10 and _raw(b) == stored
    assert _reader_raw(storage) == stored
    stored += _write(b, range(10, 15))
    assert _reader_raw(storage) == stored
    b.close()
    more_stale = _write(a, range(600, 610))
    a.checkpoint()
    c = _open(storage, 3)
    got = _raw(c)
    assert got == stored
    tags = {tag_of(raw) for raw in got}
    assert not tags & {tag_of(raw) for raw in stale + more_stale}
    assert c.high_watermark == 15
    stored += _write(c, range(15, 18))
    assert _reader_raw(storage) == stored
    with pytest.raises(KafkaError) as info:
        _open(storage, 1)
    assert info.value.code == ErrorCode.FENCED_LEADER_EPOCH
    with pytest.raises(KafkaError) as info:
        _open(storage, 2)
    assert info.value.code == ErrorCode.FENCED_LEADER_EPOCH
    c.close()
    a._shut()
    # And the same epoch can reopen (a restart of the current owner).
    c = _open(storage, 3)
    assert _raw(c) == stored
    c.close()


def test_unflushed_data_of_the_old_owner_is_lost_flushed_data_is_kept(
        storage: Storage) -> None:
    a = _open(storage, 4)
    stored = _write(a, range(5))
    append(a, make_batch([b"never flushed"]))
    b = _open(storage, 7)           # epochs need not be consecutive
    assert _raw(b) == stored
    assert b.log_end_offset == 5
    assert append(b, make_batch([b"next"])) == (5, 5)
    b.flush()
    b.close()
    a._shut()


def test_index_files_a_takeover_wrote_are_rebuilt_when_a_crash_lost_them(
        tmp_path: Path) -> None:
    """A takeover writes index files for the old owner's segment it scanned without syncing
    them (they are rebuilt from the segment when missing or short): lost in a crash, every
    offset is still found, and the index is written again."""
    storage = LocalStorage(str(tmp_path))
    unpublished = LogConfig(segment_bytes=40_000, index_interval_bytes=200, retention_ms=-1,
                            publish_interval_ms=3_600_000)
    a = _open(storage, 1, unpublished)
    _write(a, range(3))
    a.publish_state()
    _write(a, range(3, 12))
    a._shut()                       # killed: its checkpoint knows only the first three
    b = _open(storage, 2)
    stored = _raw(b)
    assert len(stored) == 12
    written = [n for n in storage.list("t/0") if "-i0000000002." in n]
    assert len(written) == 2, storage.list("t/0")
    b._shut()
    for name in written:            # what a crash of the storage host may leave
        storage.write_atomic(f"t/0/{name}", b"")
    c = _open(storage, 3)
    assert _raw(c) == stored
    for offset, batch in enumerate(stored):
        assert bytes(c.read(offset, 1))[:len(batch)] == batch
    c.close()
    assert all(storage.size(f"t/0/{name}") for name in written)    # written again


def test_owners_that_wrote_nothing_leave_a_log_the_next_ones_continue(
        storage: Storage, caplog: pytest.LogCaptureFixture) -> None:
    """Owners 2 and 3 take over and write nothing: each new segment is empty and starts where
    the previous owner's dropped empty one did, and its file is made all the same (it was not:
    the next owner found the segment its checkpoint lists missing). Owner 4 continues the log;
    every batch is read back."""
    a = _open(storage, 1)
    stored = _write(a, range(3))
    a._shut()
    for epoch in (2, 3):
        _open(storage, epoch)._shut()
    d = _open(storage, 4)
    stored += _write(d, range(3, 5))
    d._shut()
    e = _open(storage, 5)
    assert _raw(e) == stored
    assert "missing" not in caplog.text
    e.close()


def test_epoch_zero_data_migrates(storage: Storage) -> None:
    """Data written by a single-node broker (epoch 0, checkpoint.json) opens in cluster mode,
    and from then on epoch 0 is fenced."""
    legacy = _open(storage, 0)
    stored = _write(legacy, range(8))
    legacy.close()
    if storage.supports_append:
        assert storage.exists("t/0/checkpoint.json")
    a = _open(storage, 1)
    assert _raw(a) == stored
    stored += _write(a, range(8, 12))
    a.close()
    with pytest.raises(KafkaError):
        _open(storage, 0)
    a = _open(storage, 1)
    assert _raw(a) == stored
    a.close()


def test_producer_state_survives_takeover(storage: Storage) -> None:
    a = _open(storage, 1)
    for seq in range(3):
        a.append(*request(make_batch([b"p%d" % seq], producer_id=7, producer_epoch=0,
                                     base_sequence=seq)), now_ms=1)
    a.flush()
    b = _open(storage, 2)
    dup = b.append(*request(make_batch([b"p2"], producer_id=7, producer_epoch=0,
                                       base_sequence=2)), now_ms=2)
    assert dup.duplicate and dup.base_offset == 2
    with pytest.raises(KafkaError) as info:
        b.append(*request(make_batch([b"p9"], producer_id=7, producer_epoch=0,
                                     base_sequence=9)), now_ms=2)
    assert info.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    b.close()
    a._shut()


def test_reader_sees_exactly_the_published_durable_data(storage: Storage) -> None:
    config = LogConfig(segment_bytes=4000, index_interval_bytes=200, retention_ms=-1,
                       publish_interval_ms=60_000)
    w = _open(storage, 1, config)
    reader = PartitionLog.open_reader(storage, "t", 0, config)
    assert (reader.high_watermark, reader.log_start_offset) == (0, 0)
    assert reader.read(0, 100) == b""
    stored = _write(w, range(6))
    append(w, make_batch([b"queued, not flushed"]))
    w.checkpoint()                 # publishes (objects: every flush publishes already)
    assert reader.refresh()
    assert not reader.refresh()    # nothing new
    assert reader.high_watermark == 6
    assert bytes(reader.read(0, 1 << 20)) == b"".join(stored[:len(split(reader.read(0, 1 << 20)))])
    got = []
    offset = 0
    while offset < reader.high_watermark:
        data = bytes(reader.read(offset, 1))
        got.append(data)
        offset = split(data)[-1].next_offset
    assert got == stored
    with pytest.raises(KafkaError):
        reader.read(7, 100)
    w.flush()
    stored.append(with_offset(make_batch([b"queued, not flushed"]), 6))
    stored += _write(w, range(6, 30))   # rolls
    w.checkpoint()
    reader.refresh()
    assert reader.high_watermark == 31
    assert [bytes(reader.read(o, 1)) for o in range(31)] == stored
    assert w.delete_records(20) == 20
    w.apply_retention(0)
    w.checkpoint()
    reader.refresh()
    assert reader.log_start_offset == 20
    assert [bytes(reader.read(o, 1)) for o in range(20, 31)] == stored[20:]
    assert reader.max_timestamp() is not None
    assert reader.offset_for_timestamp(0) == (20, 1000)
    reader.close()
    w.close()


def test_reader_follows_the_owners_tail_without_a_checkpoint(storage: Storage) -> None:
    """What a proxy does: apply the tail a broker sends after each flush; reads then see every
    durable batch at once, across rolls, and an older checkpoint never takes the view back."""
    config = LogConfig(segment_bytes=4000, index_interval_bytes=200, retention_ms=-1,
                       publish_interval_ms=60_000)
    w = _open(storage, 1, config)
    reader = PartitionLog.open_reader(storage, "t", 0, config)
    stored: list[bytes] = []
    for start in range(0, 30, 3):            # ten flushes, several segment rolls
        stored += _write(w, range(start, start + 3))
        assert reader.advance(w.tail())
        assert reader.high_watermark == w.high_watermark == len(stored)
        assert [bytes(reader.read(o, 1)) for o in range(len(stored))] == stored
    assert not reader.advance(w.tail())      # nothing new
    reader.refresh()                          # the only checkpoint is older than the tail
    assert reader.high_watermark == len(stored)
    stored += _write(w, range(30, 33))
    gap = json.loads(w.tail())
    gap["segments"][-1]["base_offset"] += 1000
    reader.advance(json.dumps(gap).encode())   # does not continue the view: refreshes
    assert reader.high_watermark <= len(stored)
    reader.advance(w.tail())                  # (an object store's manifest was already current)
    assert reader.high_watermark == len(stored)
    assert [bytes(reader.read(o, 1)) for o in range(len(stored))] == stored
    reader.close()
    w.close()


class _LaggingSizeStorage(LocalStorage):
    """Reports sizes the way HDFS does for a file still being written: whole blocks only."""

    exact_size = False

    def size(self, path: str) -> int:
        real = super().size(path)
        return real - real % 4096


def test_takeover_reads_past_a_lagging_file_size(tmp_path: Path) -> None:
    storage = _LaggingSizeStorage(str(tmp_path / "data"))
    a = _open(storage, 1, LogConfig(segment_bytes=1 << 20, retention_ms=-1))
    stored = _write(a, range(13), size=999)
    b = _open(storage, 2)
    assert _raw(b) == stored
    b.close()
    a._shut()


def test_fenced_owner_cannot_destroy_the_new_owners_data(storage: Storage) -> None:
    a = _open(storage, 1)
    stored = _write(a, range(12))          # several segments / objects
    b = _open(storage, 2)
    for attempt in (lambda: a.delete_records(9), a.delete, a.merge_objects,
                    lambda: a.apply_retention(10**15)):
        try:
            attempt()
        except KafkaError as exc:
            assert exc.code == ErrorCode.FENCED_LEADER_EPOCH
    a.config.retention_ms = 0
    try:
        a.apply_retention(10**15)
    except KafkaError as exc:
        assert exc.code == ErrorCode.FENCED_LEADER_EPOCH
    try:
        a.checkpoint()
    except KafkaError as exc:
        assert exc.code == ErrorCode.FENCED_LEADER_EPOCH
    assert _raw(b) == stored
    assert _reader_raw(storage) == stored
    b.close()
    c = _open(storage, 3)
    assert _raw(c) == stored and c.log_start_offset == 0
    c.close()
    a._shut()


def test_end_offset_for_epoch_answers_as_kafkas_leader(storage: Storage) -> None:
    """OffsetForLeaderEpoch's answers, Kafka's rules, as a proxy's reader gives them: the floor
    epoch and where it ends; the current epoch (asked by a consumer checking its position after
    a move) ending at the high watermark even before that epoch's owner published anything, or
    on an empty log; an epoch older than the log's first starting there."""
    writer = _open(storage, 1)
    reader = PartitionLog.open_reader(storage, "t", 0, CONFIG)
    assert reader.end_offset_for_epoch(1, current_epoch=1) == (1, 0)     # nothing written
    reader.close()
    writer.close()
    first = _open(storage, 2)
    _write(first, range(3))                                  # epoch 2: offsets 0-2
    first.close()
    second = _open(storage, 4)
    _write(second, range(3, 5))                              # epoch 4: offsets 3-4
    second.close()
    _open(storage, 6)                                        # taken over, nothing written yet
    reader = PartitionLog.open_reader(storage, "t", 0, CONFIG)
    assert reader.end_offset_for_epoch(2, current_epoch=6) == (2, 3)
    assert reader.end_offset_for_epoch(3, current_epoch=6) == (2, 3)
    assert reader.end_offset_for_epoch(4, current_epoch=6) == (4, 5)
    assert reader.end_offset_for_epoch(5, current_epoch=6) == (4, 5)
    assert reader.end_offset_for_epoch(6, current_epoch=6) == (6, 5)
    assert reader.end_offset_for_epoch(1, current_epoch=6) == (1, 0)
    reader.close()
