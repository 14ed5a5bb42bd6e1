from __future__ import annotations

import random
import threading
import time

from bmq.storage import PartitionLog

from .batches import request, sized_batch, split, tag_of
from .conftest import OpenLog


def _tags(data: bytes) -> list[tuple[int, int, int]]:
    """(base offset, next offset, tag) of each batch."""
    out = []
    pos = 0
    for header in split(data):
        raw = data[pos:pos + header.size]
        out.append((header.base_offset, header.next_offset, tag_of(raw)))
        pos += header.size
    return out


def test_append_on_one_thread_while_flush_and_reads_run_on_others(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=64 * 1024, index_interval_bytes=512)
    total = 4000 if log.storage.supports_append else 800   # (S3: ~50 ms per request)
    stop = threading.Event()
    errors: list[BaseException] = []
    flushes = [0]

    def flusher() -> None:
        try:
            while not stop.is_set() or log.pending_bytes():
                log.flush()
                flushes[0] += 1
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def consumer() -> None:
        # A consumer following the high watermark must see every batch once, in order.
        try:
            offset = 0
            tag = 0
            while tag < total:
                data = bytes(log.read(offset, 20_000))
                if not data:
                    time.sleep(0.0005)
                    continue
                for base, next_offset, got in _tags(data):
                    assert (base, got) == (offset, tag)
                    offset = next_offset
                    tag += 1
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=flusher), threading.Thread(target=consumer)]
    for t in threads:
        t.start()
    rng = random.Random(7)
    end = 0
    try:
        for i in range(total):
            result = log.append(*request(sized_batch(rng.randint(80, 3000), i)), now_ms=i)
            assert result.base_offset == end
            end = result.last_offset + 1
            if i % 50 == 0 and log.high_watermark:
                probe = rng.randrange(log.high_watermark)
                base, next_offset, _ = _tags(bytes(log.read(probe, 1)))[0]
                assert base <= probe < next_offset
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    assert not errors, errors
    assert log.flush() == end
    assert flushes[0] > 10          # many group commits happened meanwhile
    offset = 0
    seen: list[int] = []
    while offset < end:
        tags = _tags(bytes(log.read(offset, 1 << 20)))
        seen.extend(tag for _, _, tag in tags)
        offset = tags[-1][1]
    assert seen == list(range(total))
    log.close()
    reopened: PartitionLog = open_log(segment_bytes=64 * 1024, index_interval_bytes=512)
    assert reopened.high_watermark == end


def test_retention_and_reads_race_safely(open_log: OpenLog) -> None:
    """Segments deleted under concurrent readers: reads either succeed with the right data or
    fail with OFFSET_OUT_OF_RANGE; never garbage from a recycled descriptor."""
    from bmq.protocol.errors import ErrorCode, KafkaError

    log = open_log(segment_bytes=8 * 1024, index_interval_bytes=256, retention_ms=-1,
                   retention_bytes=32 * 1024)
    total = 3000
    stop = threading.Event()
    errors: list[BaseException] = []
    tags_at: dict[int, int] = {}    # base offset -> tag, filled by the appender

    def maintenance() -> None:
        try:
            while not stop.is_set() or log.pending_bytes():
                log.flush()
                log.apply_retention(now_ms=0)
                log.checkpoint()
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    def reader(seed: int) -> None:
        rng = random.Random(seed)
        reads = 0
        try:
            while not stop.is_set():
                start, end = log.log_start_offset, log.high_watermark
                if end <= start:
                    time.sleep(0.0005)
                    continue
                offset = rng.randrange(start, end)
                try:
                    data = bytes(log.read(offset, rng.choice([1, 5000, 50_000])))
                except KafkaError as exc:
                    assert exc.code == ErrorCode.OFFSET_OUT_OF_RANGE
                    continue
                batches = _tags(data)
                assert batches[0][0] <= offset < batches[0][1]
                for base, _next, tag in batches:
                    assert tags_at[base] == tag
                reads += 1
            assert reads > 0
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=maintenance),
               *(threading.Thread(target=reader, args=(s,)) for s in range(2))]
    for t in threads:
        t.start()
    rng = random.Random(11)
    try:
        for i in range(total):
            batch = sized_batch(rng.randint(100, 2000), i)
            view, headers = request(batch)
            base = log.log_end_offset
            tags_at[base] = i
            assert log.append(view, headers, now_ms=0).base_offset == base
            if i % 10 == 0:
                time.sleep(0.001)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    assert not errors, errors
    log.flush()
    log.apply_retention(now_ms=0)
    # One segment more than retention.bytes at most (on object stores an object is one flush,
    # which may be larger than segment.bytes).
    largest = max(seg.size for seg in log.segments.by_offset)
    assert log.size_bytes <= 32 * 1024 + max(8 * 1024, largest)
    assert log.log_start_offset > 0
    survivors = [tag for _, _, tag in _tags(bytes(log.read(log.log_start_offset, 1 << 20)))]
    assert survivors == sorted(survivors) and survivors[-1] <= total - 1
