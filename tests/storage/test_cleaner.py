"""The log cleaner on a partition log, both layouts (files; objects on a local directory):
a full offset map spreads the work over passes, reads skip the gaps it leaves, the log start
offset stays, and a restart sees the cleaned log."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from bmq.cleaner import LogCleaner
from bmq.protocol.record_codec import Record, decode_batch, encode_batch
from bmq.storage import LocalStorage, LogConfig, PartitionLog, Storage

from .helpers import read_batches

CONFIG = LogConfig(segment_bytes=4096, retention_ms=-1, compact=True, delete_retention_ms=0,
                   index_interval_bytes=256)
NOW = 1_700_000_000_000


@pytest.fixture(params=["files", "objects"])
def cstorage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
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
    for i in range(60):   # a full active segment (and, with objects, newest objects) after
        batch, header = encode_batch([Record(0, NOW, b"filler", b"f" * 60, [])])
        log.append(memoryview(batch), [header], NOW)
        if i % 10 == 9:
            log.flush()
    log.flush()
    return last


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
