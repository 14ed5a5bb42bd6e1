from __future__ import annotations

import copy

import pytest

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.records import TIMESTAMP_TYPE_LOG_APPEND
from bmq.storage import LogConfig, PartitionLog, Storage
from bmq.storage.log.object_layout import ObjectLayout

from .batches import make_batch, request, sized_batch, split, with_offset
from .conftest import OpenLog
from .helpers import append, read_batches, segment_files


def test_round_trip_byte_exact(open_log: OpenLog) -> None:
    log = open_log()
    b1 = make_batch([b"a", b"b", b"c"])
    b2 = make_batch([b"d"])
    b3 = make_batch([b"e" * 1000, b"f"])
    result = log.append(*request(b1, b2), now_ms=5)
    assert (result.base_offset, result.last_offset, result.log_append_time,
            result.log_start_offset, result.duplicate) == (0, 3, -1, 0, False)
    result = log.append(*request(b3), now_ms=6)
    assert (result.base_offset, result.last_offset) == (4, 5)
    assert log.log_end_offset == 6
    assert log.high_watermark == 0
    assert log.pending_bytes() == len(b1) + len(b2) + len(b3)
    assert log.flush() == 6
    assert log.pending_bytes() == 0
    assert log.high_watermark == 6
    expected = with_offset(b1, 0) + with_offset(b2, 3) + with_offset(b3, 4)
    assert bytes(log.read(0, 1 << 20)) == expected
    assert log.size_bytes == len(expected)
    log.close()


def test_read_from_inside_a_batch_returns_the_containing_batch(open_log: OpenLog) -> None:
    log = open_log()
    b1 = make_batch([b"%d" % i for i in range(10)])
    b2 = make_batch([b"x", b"y"])
    append(log, b1)
    append(log, b2)
    log.flush()
    for offset in range(10):
        data = bytes(log.read(offset, 1 << 20))
        assert data == with_offset(b1, 0) + with_offset(b2, 10)
    assert bytes(log.read(11, 1 << 20)) == with_offset(b2, 10)
    assert log.read(12, 1 << 20) == b""


def test_max_bytes_and_min_one_batch(open_log: OpenLog) -> None:
    log = open_log()
    batches = [sized_batch(1000, i) for i in range(5)]
    for b in batches:
        append(log, b)
    log.flush()
    stored = [with_offset(b, i) for i, b in enumerate(batches)]
    assert bytes(log.read(0, 2500)) == stored[0] + stored[1]
    assert bytes(log.read(0, 2000)) == stored[0] + stored[1]
    assert bytes(log.read(0, 1999)) == stored[0]
    assert bytes(log.read(0, 1)) == stored[0]     # min one batch
    assert bytes(log.read(0, 0)) == stored[0]
    assert bytes(log.read(3, 10)) == stored[3]
    assert bytes(log.read(1, 1 << 30)) == b"".join(stored[1:])


def test_offset_out_of_range(open_log: OpenLog) -> None:
    log = open_log()
    append(log, make_batch([b"a", b"b"]))
    log.flush()
    append(log, make_batch([b"c"]))      # not flushed: beyond the high watermark
    assert log.read(2, 100) == b""
    for bad in (-1, 3, 100):
        with pytest.raises(KafkaError) as info:
            log.read(bad, 100)
        assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_high_watermark_excludes_unflushed_data(open_log: OpenLog) -> None:
    log = open_log()
    append(log, make_batch([b"a"]))
    assert log.log_end_offset == 1
    assert log.high_watermark == 0
    assert log.read(0, 100) == b""
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp() is None
    log.flush()
    append(log, make_batch([b"b"]))
    assert len(split(log.read(0, 1 << 20))) == 1
    log.flush()
    assert len(split(log.read(0, 1 << 20))) == 2


def test_log_append_time(open_log: OpenLog) -> None:
    log = open_log(message_timestamp_type="LogAppendTime")
    b = make_batch([b"a", b"b"], timestamp=5)
    result = log.append(*request(b), now_ms=777)
    assert result.log_append_time == 777
    log.flush()
    (header,) = split(log.read(0, 1000))     # split checks the recomputed CRC
    assert header.max_timestamp == 777
    assert header.attributes & TIMESTAMP_TYPE_LOG_APPEND
    assert log.max_timestamp() == (0, 777)


def test_segment_roll_by_bytes(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=3000)
    batches = [sized_batch(1000, i) for i in range(10)]
    for b in batches:
        append(log, b)
    log.flush()                       # one flush spanning four segments
    assert segment_files(log) == [f"{b:020d}.log" for b in (0, 3, 6, 9)]
    assert log.storage.size(f"{log.dir}/{0:020d}.log") == 3000
    got = read_batches(log, max_bytes=10_000)
    assert [h.base_offset for h, _ in got] == list(range(10))
    assert [raw for _, raw in got] == [with_offset(b, i) for i, b in enumerate(batches)]
    for b in batches[:4]:             # and flushes one at a time
        append(log, b)
        log.flush()
    assert segment_files(log)[-2:] == [f"{b:020d}.log" for b in (9, 12)]
    assert log.size_bytes == 14_000


def test_segment_roll_by_time(open_log: OpenLog) -> None:
    log = open_log(segment_ms=1000)
    append(log, make_batch([b"a"]), now_ms=10_000)
    log.flush()
    append(log, make_batch([b"b"]), now_ms=11_000)   # exactly segment.ms later: no roll
    log.flush()
    assert len(segment_files(log)) == 1
    append(log, make_batch([b"c"]), now_ms=11_001)
    log.flush()
    assert segment_files(log) == [f"{0:020d}.log", f"{2:020d}.log"]
    append(log, make_batch([b"d"]), now_ms=11_002)
    log.flush()
    assert len(segment_files(log)) == 2


def test_oversized_batch_gets_its_own_segment(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1000)
    append(log, sized_batch(300, 0))
    append(log, sized_batch(5000, 1))
    append(log, sized_batch(300, 2))
    log.flush()
    assert segment_files(log) == [f"{b:020d}.log" for b in (0, 1, 2)]
    assert [h.base_offset for h, _ in read_batches(log)] == [0, 1, 2]


def test_index_based_reads_across_many_segments(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=5000, index_interval_bytes=300)
    expected: list[tuple[int, bytes]] = []
    offset = 0
    for i in range(150):
        count = 1 + i % 4
        b = make_batch([b"%d-%d" % (i, j) + b"z" * (i % 37) * 7 for j in range(count)])
        append(log, b)
        expected.append((offset, with_offset(b, offset)))
        offset += count
        if i % 7 == 0:
            log.flush()
    log.flush()
    assert len(segment_files(log)) > 5

    def check(log: PartitionLog) -> None:
        for base, raw in expected:
            last = base + split(raw)[0].last_offset_delta
            for o in range(base, last + 1):
                data = bytes(log.read(o, 1))
                assert data == raw, o
        assert [raw for _, raw in read_batches(log, max_bytes=2000)] == [r for _, r in expected]

    check(log)
    log.close()
    check(open_log(segment_bytes=5000, index_interval_bytes=300))


def test_offset_for_timestamp_and_max_timestamp(open_log: OpenLog) -> None:
    stamps = [100, 200, 150, 300, 300, 250, 400, 120, 400, 390]
    log = open_log(segment_bytes=200, index_interval_bytes=1)
    for i, ts in enumerate(stamps):
        append(log, make_batch([b"r%d" % i, b"s"], timestamps=[ts - 50, ts]))
        log.flush()
    assert len(segment_files(log)) > 2

    def expect(target: int) -> tuple[int, int] | None:
        for i, ts in enumerate(stamps):
            if ts >= target:
                return 2 * i, ts
        return None

    def check(log: PartitionLog) -> None:
        for target in range(0, 460, 5):
            assert log.offset_for_timestamp(target) == expect(target), target
        assert log.max_timestamp() == (12, 400)

    check(log)
    log.close()
    check(open_log(segment_bytes=200, index_interval_bytes=1))


def test_delete_records(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=2000)
    for i in range(10):
        append(log, sized_batch(1000, i))
    log.flush()
    append(log, sized_batch(1000, 10))   # unflushed
    with pytest.raises(KafkaError) as info:
        log.delete_records(11)
    assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert log.delete_records(5) == 5
    assert log.log_start_offset == 5
    assert segment_files(log) == [f"{b:020d}.log" for b in (4, 6, 8)]
    with pytest.raises(KafkaError):
        log.read(4, 100)
    assert split(log.read(5, 100))[0].base_offset == 5
    assert log.delete_records(3) == 5      # never backwards
    assert log.offset_for_timestamp(0) == (5, 1000)
    assert log.delete_records(10) == 10    # up to the high watermark
    assert log.read(10, 100) == b""
    assert segment_files(log) == [f"{8:020d}.log"]  # the active segment stays
    log.close()
    reopened = open_log(segment_bytes=2000)
    assert reopened.log_start_offset == 10
    assert reopened.high_watermark == 11


def test_retention_by_time(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=2000, retention_ms=1000)
    for i in range(6):   # two batches per segment, timestamps 0, 100, ... 500
        append(log, sized_batch(1000, i, timestamp=i * 100))
    log.flush()
    assert len(segment_files(log)) == 3
    assert log.apply_retention(now_ms=1100) == 0     # newest of the first segment: 100
    assert log.apply_retention(now_ms=1101) == 1
    assert log.log_start_offset == 2
    assert log.apply_retention(now_ms=100_000) == 1  # never the active segment
    assert segment_files(log) == [f"{4:020d}.log"]
    assert log.log_start_offset == 4
    assert [h.base_offset for h, _ in read_batches(log)] == [4, 5]
    unlimited = open_log(topic="u", segment_bytes=2000, retention_ms=-1)
    for i in range(6):
        append(unlimited, sized_batch(1000, i, timestamp=0))
    unlimited.flush()
    assert unlimited.apply_retention(now_ms=10**12) == 0


def test_retention_by_size(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=2000, retention_ms=-1, retention_bytes=3500)
    for i in range(7):
        append(log, sized_batch(1000, i))
    log.flush()
    assert log.size_bytes == 7000
    # Kafka's rule: delete oldest segments while the size stays >= retention.bytes afterwards.
    assert log.apply_retention(now_ms=0) == 1
    assert log.size_bytes == 5000
    assert log.apply_retention(now_ms=0) == 0
    log.config.retention_bytes = 1000   # AlterConfigs replaces/mutates the config
    assert log.apply_retention(now_ms=0) == 2
    assert log.size_bytes == 1000
    assert log.log_start_offset == 6


def test_closed_log_refuses_appends(open_log: OpenLog) -> None:
    log = open_log()
    log.close()
    log.close()
    with pytest.raises(KafkaError) as info:
        append(log, make_batch([b"a"]))
    assert info.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_delete_removes_the_directory(open_log: OpenLog, storage: Storage) -> None:
    log = open_log()
    append(log, make_batch([b"a"]))
    log.flush()
    log.delete()
    assert not storage.exists("t/0/checkpoint.json")
    # (SeaweedFS keeps an emptied "directory" of the object layout's manifests.)
    assert [n for n in storage.list("t/0") if n != "manifest"] == []
    assert storage.list("t/0/manifest") == []


def test_partitions_are_independent(open_log: OpenLog) -> None:
    a = open_log(partition=0)
    b = open_log(partition=1)
    append(a, make_batch([b"a"]))
    append(b, make_batch([b"b1", b"b2"]))
    a.flush()
    b.flush()
    assert (a.high_watermark, b.high_watermark) == (1, 2)


def test_invalid_names_and_object_stores(storage: Storage) -> None:
    with pytest.raises(ValueError):
        PartitionLog.open(storage, "../etc", 0, LogConfig())
    with pytest.raises(ValueError):
        PartitionLog.open(storage, "t", -1, LogConfig())

    store = copy.copy(storage)
    store.supports_append = False   # e.g. S3: the object layout, behind the same API
    log = PartitionLog.open(store, "t", 0, LogConfig())
    assert isinstance(log.layout, ObjectLayout)
    append(log, make_batch([b"a"]))
    log.flush()
    assert [n.endswith("-0000000000-000000000000.log") for n in segment_files(log)] == [True]
    log.close()
