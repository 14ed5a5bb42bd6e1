from __future__ import annotations

import json
import os
import struct
from collections.abc import Sequence
from pathlib import Path

from bmq.storage import LocalStorage, LogConfig, PartitionLog, Storage
from bmq.storage.log.state import CHECKPOINT_FILE

from .batches import make_batch, request, sized_batch, with_offset
from .conftest import OpenLog
from .helpers import append, read_batches, segment_files

SEG0 = f"t/0/{0:020d}.log"


def _write_tail(storage: Storage, path: str, data: bytes) -> None:
    appender = storage.open_append(path)
    try:
        appender.write([data])
        appender.sync()
    finally:
        appender.close()


def _fill(open_log: OpenLog, count: int = 5, **config: int) -> tuple[list[bytes], int]:
    log = open_log(**config)
    stored = []
    for i in range(count):
        b = make_batch([b"v%d" % i, b"w%d" % i], timestamp=100 + i)
        append(log, b)
        stored.append(with_offset(b, 2 * i))
        log.flush()
    return stored, log.high_watermark


def _raw(log_batches: Sequence[tuple[object, bytes]]) -> list[bytes]:
    return [raw for _, raw in log_batches]


def test_torn_tail_is_truncated(open_log: OpenLog, storage: Storage) -> None:
    stored, hw = _fill(open_log)
    size = storage.size(SEG0)
    # Crash mid-write: half of the next batch made it to the file; no close, no checkpoint.
    _write_tail(storage, SEG0, with_offset(make_batch([b"lost"]), hw)[:40])
    log = open_log()
    assert log.high_watermark == log.log_end_offset == hw
    assert storage.size(SEG0) == size
    assert _raw(read_batches(log)) == stored
    assert append(log, make_batch([b"next"])) == (hw, hw)
    log.flush()
    assert len(read_batches(log)) == len(stored) + 1


def test_garbage_tail_is_truncated(open_log: OpenLog, storage: Storage) -> None:
    stored, hw = _fill(open_log)
    _write_tail(storage, SEG0, os.urandom(5000))
    log = open_log()
    assert log.high_watermark == hw
    assert _raw(read_batches(log)) == stored


def test_zero_filled_tail_is_truncated(open_log: OpenLog, storage: Storage) -> None:
    stored, hw = _fill(open_log)
    _write_tail(storage, SEG0, bytes(4096))   # e.g. preallocated blocks after a power cut
    log = open_log()
    assert log.high_watermark == hw
    assert _raw(read_batches(log)) == stored


def test_bad_crc_and_wrong_offsets_are_truncated(open_log: OpenLog, storage: Storage) -> None:
    stored, hw = _fill(open_log)
    good = with_offset(make_batch([b"good"]), hw)
    corrupt = bytearray(with_offset(make_batch([b"bad!"]), hw + 1))
    corrupt[-3] ^= 0xFF
    _write_tail(storage, SEG0, good + bytes(corrupt))
    log = open_log()
    assert log.high_watermark == hw + 1          # the intact batch after the checkpoint stays
    assert _raw(read_batches(log)) == [*stored, good]
    log.close()
    # A valid batch that does not continue the offsets (a stale copy) is not accepted either.
    _write_tail(storage, SEG0, with_offset(make_batch([b"stale"]), 3))
    log = open_log()
    assert log.high_watermark == hw + 1


def test_missing_checkpoint_scans_everything(open_log: OpenLog, storage: Storage) -> None:
    log = open_log(segment_bytes=300)
    stored = []
    for i in range(12):
        b = make_batch([b"x%d" % i], timestamp=i, producer_id=9, producer_epoch=0,
                       base_sequence=i)
        append(log, b)
        stored.append(with_offset(b, i))
    log.flush()
    log.delete_records(2)
    log.close()
    assert len(segment_files(log)) > 2
    storage.delete("t/0/checkpoint.json")
    log = open_log(segment_bytes=300)
    assert log.high_watermark == 12
    assert log.log_start_offset == 0           # without the checkpoint: the first segment's base
    assert _raw(read_batches(log)) == stored
    # Producer state was rebuilt from the batch headers.
    dup = log.append(*request(make_batch([b"x11"], producer_id=9, producer_epoch=0,
                                      base_sequence=11)), now_ms=0)
    assert dup.duplicate and dup.base_offset == 11


def test_corrupt_checkpoint_is_ignored(open_log: OpenLog, storage: Storage) -> None:
    stored, hw = _fill(open_log)
    storage.write_atomic("t/0/checkpoint.json", b"{not json")
    log = open_log()
    assert log.high_watermark == hw
    assert _raw(read_batches(log)) == stored
    assert json.loads(storage.read_all("t/0/checkpoint.json"))["recovery_point"] == hw


def test_corrupt_index_files_are_rebuilt(open_log: OpenLog, storage: Storage) -> None:
    config = {"segment_bytes": 3000, "index_interval_bytes": 1}
    log = open_log(**config)
    batches = [sized_batch(500, i, timestamp=10 * i) for i in range(20)]
    for b in batches:
        append(log, b)
    log.flush()
    log.close()
    names = storage.list("t/0")
    indexes = [n for n in names if n.endswith(".index")]
    timeindexes = [n for n in names if n.endswith(".timeindex")]
    assert len(indexes) >= 3
    # Garbage in a sealed segment's offset index, a truncated time index, and in the
    # active segment's index.
    storage.write_atomic(f"t/0/{indexes[0]}", os.urandom(40))
    storage.write_atomic(f"t/0/{timeindexes[2]}", b"\x00" * 5)
    storage.write_atomic(f"t/0/{indexes[-1]}", os.urandom(64))
    # A structurally valid index that points into the middle of batches.
    storage.write_atomic(f"t/0/{indexes[1]}", b"".join(
        struct.pack(">II", rel, rel * 500 + 17) for rel in range(1, 6)))
    log = open_log(**config)
    expected = [with_offset(b, i) for i, b in enumerate(batches)]
    for i in range(20):
        assert bytes(log.read(i, 1)) == expected[i]
    assert _raw(read_batches(log)) == expected
    for i in range(20):
        assert log.offset_for_timestamp(10 * i) == (i, 10 * i)
    # The rebuilt files are what a fresh index would be.
    log.close()
    rebuilt = storage.read_all(f"t/0/{indexes[1]}")
    assert [struct.unpack_from(">II", rebuilt, k) for k in range(0, len(rebuilt), 8)] == \
        [(rel, rel * 500) for rel in range(1, 6)]


def test_crash_after_rolls_past_the_checkpoint(open_log: OpenLog, storage: Storage) -> None:
    log = open_log(segment_bytes=2000)
    expected = []
    for i in range(4):
        b = sized_batch(900, i)
        append(log, b)
        expected.append(with_offset(b, i))
    log.flush()
    log.checkpoint()
    for i in range(4, 11):                         # several rolls after the checkpoint
        b = sized_batch(900, i)
        append(log, b)
        expected.append(with_offset(b, i))
        log.flush()
    files = segment_files(log)
    _write_tail(storage, f"t/0/{files[-1]}", b"\x01\x02\x03")
    log = open_log(segment_bytes=2000)             # no close: a crash
    assert log.high_watermark == 11
    assert _raw(read_batches(log)) == expected


def test_truncation_in_an_earlier_segment_drops_later_ones(open_log: OpenLog,
                                                           storage: Storage) -> None:
    log = open_log(segment_bytes=2000)
    for i in range(6):
        append(log, sized_batch(900, i))
        log.flush()
    files = segment_files(log)
    assert len(files) == 3
    # Without a checkpoint everything is scanned; damage the middle segment's last batch.
    storage.delete("t/0/checkpoint.json")
    middle = f"t/0/{files[1]}"
    data = bytearray(storage.read_all(middle))
    data[-5] ^= 0x55
    storage.write_atomic(middle, bytes(data))
    log = open_log(segment_bytes=2000)
    assert log.high_watermark == 3
    assert segment_files(log) == files[:2]
    assert append(log, sized_batch(900, 99)) == (3, 3)


def test_leftover_files_are_cleaned(open_log: OpenLog, storage: Storage) -> None:
    stored, _ = _fill(open_log, segment_bytes=1 << 20)
    storage.write_atomic("t/0/checkpoint.json.tmp.1.2.3", b"partial")
    storage.write_atomic(f"t/0/{99:020d}.index", b"")
    log = open_log()
    names = storage.list("t/0")
    assert not any(".tmp." in n for n in names)
    assert f"{99:020d}.index" not in names
    assert _raw(read_batches(log)) == stored


def test_checkpoint_contents(open_log: OpenLog, storage: Storage) -> None:
    log = open_log(segment_bytes=300, index_interval_bytes=1)
    for i in range(6):
        append(log, make_batch([b"p%d" % i], timestamp=50 + i, producer_id=4,
                               producer_epoch=2, base_sequence=i))
    log.flush()
    log.checkpoint()
    state = json.loads(storage.read_all("t/0/checkpoint.json"))
    assert state["version"] == 1
    assert state["log_start_offset"] == 0
    assert state["recovery_point"] == state["high_watermark"] == 6
    assert [s["base_offset"] for s in state["segments"]] == \
        [int(n[:20]) for n in segment_files(log)]
    assert sum(s["size"] for s in state["segments"]) == log.size_bytes
    assert state["segments"][-1]["next_offset"] == 6
    producer = state["producers"]["4"]
    assert producer["epoch"] == 2
    assert producer["batches"][-1] == [5, 5, 5, 5, 55]
    assert len(producer["batches"]) == 5
    assert log.producer_state() == state["producers"]


def test_a_restart_after_a_clean_stop_writes_no_state_document(tmp_path: Path) -> None:
    """Its log is as the document says: no new one (a file write and two syncs a partition);
    a log that changed since gets one."""
    storage = LocalStorage(str(tmp_path))
    document = tmp_path / "t" / "0" / CHECKPOINT_FILE

    def reopened(*batches: bytes) -> int:
        log = PartitionLog.open(storage, "t", 0, LogConfig())
        if batches:
            append(log, *batches)
            log.flush()
        log.close()
        return document.stat().st_ino     # (every write replaces the file)

    empty = reopened()
    assert reopened() == empty                      # an empty log, stopped and started
    written = reopened(make_batch([b"a", b"b"]))
    assert written != empty
    assert reopened() == written                    # a log with data, stopped and started
    log = PartitionLog.open(storage, "t", 0, LogConfig())
    assert [h.base_offset for h, _ in read_batches(log)] == [0]
    log.close()
