"""Batches copied from another log (a mirror's source) keep their offsets: gaps a compacted
source has stay gaps, a log whose source deleted its head starts past offset 0
(``PartitionLog.start_at``), and both survive a reopen and a crash (recovery's scan)."""

from __future__ import annotations

import pytest

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.storage import PartitionLog

from .batches import make_batch, request, sized_batch, split
from .conftest import OpenLog
from .helpers import read_batches


def copy(log: PartitionLog, *batches: bytes) -> None:
    log.append(*request(*batches), now_ms=1_000, copied=True)


def offsets(log: PartitionLog) -> list[tuple[int, int]]:
    """(base offset, last offset) of every batch, read as a consumer reads."""
    return [(header.base_offset, header.last_offset) for header, _ in read_batches(log)]


# Batches of a compacted source: offsets 0-1, 4, 9-10, 11 (gaps 2-3 and 5-8), one of an
# idempotent producer whose sequences skip too (the source's cleaner removed batches).
GAPPED = [make_batch([b"a", b"b"], base_offset=0),
          make_batch([b"c"], base_offset=4, producer_id=7, producer_epoch=0, base_sequence=3),
          make_batch([b"d", b"e"], base_offset=9, producer_id=7, producer_epoch=0,
                     base_sequence=9),
          make_batch([b"f"], base_offset=11)]
GAPPED_OFFSETS = [(0, 1), (4, 4), (9, 10), (11, 11)]


def test_copied_batches_keep_their_offsets_and_gaps(open_log: OpenLog) -> None:
    log = open_log()
    copy(log, *GAPPED[:2])
    copy(log, *GAPPED[2:])
    log.flush()
    assert (log.log_start_offset, log.high_watermark) == (0, 12)
    assert offsets(log) == GAPPED_OFFSETS
    assert split(log.read(5, 1 << 20))[0].base_offset == 9     # a gap reads as the next batch
    log.close()
    assert offsets(open_log()) == GAPPED_OFFSETS


def test_copied_gaps_survive_a_crash(open_log: OpenLog) -> None:
    """Flushed, no state document after them: recovery's scan takes the gaps, it does not cut
    the log at the first one."""
    log = open_log()
    log.close()
    log = open_log()
    copy(log, *GAPPED)
    log.flush()
    log.abandon()       # a kill -9: the state document still names an empty log
    reopened = open_log()
    assert reopened.high_watermark == 12
    assert offsets(reopened) == GAPPED_OFFSETS


def test_a_gap_before_a_roll_ends_the_segment_rolled_away_from(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=2500)
    for base in (0, 10, 20, 30, 40):    # 1,000-byte batches, gaps of 9 offsets: 2 a segment
        copy(log, sized_batch(1000, base, base_offset=base))
        log.flush()
    expected = [(base, base) for base in (0, 10, 20, 30, 40)]
    assert offsets(log) == expected
    for offset in (1, 15, 25, 39):      # gaps, also to a segment's end
        assert split(log.read(offset, 100))[0].base_offset == (offset // 10 + 1) * 10
    log.abandon()
    assert offsets(open_log(segment_bytes=2500)) == expected


def test_a_copied_batch_must_not_start_before_the_log_end(open_log: OpenLog) -> None:
    log = open_log()
    copy(log, *GAPPED[:2])
    for batches, code in (([make_batch([b"x"], base_offset=3)], ErrorCode.OFFSET_OUT_OF_RANGE),
                          ([make_batch([b"x"], base_offset=6), make_batch([b"y"], base_offset=6)],
                           ErrorCode.INVALID_RECORD),
                          ([make_batch([b"x"], base_offset=5 + (1 << 31))],
                           ErrorCode.INVALID_RECORD)):
        with pytest.raises(KafkaError) as refused:
            copy(log, *batches)
        assert refused.value.code == code
    log.flush()
    assert offsets(log) == GAPPED_OFFSETS[:2]


def test_a_log_starts_at_an_offset_past_its_end(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=2500)
    for i in range(5):
        copy(log, sized_batch(1000, i, base_offset=i))
    log.flush()
    with pytest.raises(KafkaError) as refused:
        log.start_at(5)         # not past the end: nothing would be deleted
    assert refused.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    log.start_at(1_000_000)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (1_000_000,) * 3
    assert [n for n in log.storage.list(log.dir) if n.endswith(".log")
            and int(n[:20]) < 1_000_000] == []      # the old segments' files are gone
    with pytest.raises(KafkaError) as gone:
        log.read(4, 100)
    assert gone.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert log.read(1_000_000, 100) == b""
    log.close()
    reopened = open_log(segment_bytes=2500)
    assert (reopened.log_start_offset, reopened.high_watermark) == (1_000_000, 1_000_000)
    copy(reopened, make_batch([b"x"], base_offset=1_000_003))
    reopened.flush()
    assert offsets(reopened) == [(1_000_003, 1_000_003)]
    reopened.abandon()
    assert offsets(open_log(segment_bytes=2500)) == [(1_000_003, 1_000_003)]


def test_starting_at_an_offset_ends_the_open_transactions_below(open_log: OpenLog) -> None:
    """No transaction stays open below the new start: read_committed reads on."""
    log = open_log()
    copy(log, make_batch([b"t"], base_offset=0, producer_id=9, producer_epoch=0,
                         base_sequence=0, attributes=0x10))
    log.flush()
    assert log.last_stable_offset() == 0
    log.start_at(10)
    assert log.last_stable_offset() == 10
