from __future__ import annotations

import pytest

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.storage import PartitionLog, Storage

from .batches import make_batch, request
from .conftest import OpenLog
from .helpers import read_batches, segment_files

PID = 1234


def pbatch(seq: int, count: int = 1, epoch: int = 0, pid: int = PID, ts: int = 1_000) -> bytes:
    return make_batch([b"%d/%d" % (seq, i) for i in range(count)], producer_id=pid,
                      producer_epoch=epoch, base_sequence=seq, timestamp=ts)


def produce(log: PartitionLog, *batches: bytes, now_ms: int = 1_000) -> tuple[int, int, bool]:
    r = log.append(*request(*batches), now_ms=now_ms)
    return r.base_offset, r.last_offset, r.duplicate


def expect_error(log: PartitionLog, code: ErrorCode, *batches: bytes) -> None:
    end, pending = log.log_end_offset, log.pending_bytes()
    with pytest.raises(KafkaError) as info:
        log.append(*request(*batches), now_ms=1_000)
    assert info.value.code == code
    assert (log.log_end_offset, log.pending_bytes()) == (end, pending)   # nothing changed


def test_duplicate_returns_original_offsets(open_log: OpenLog) -> None:
    log = open_log()
    assert produce(log, pbatch(0, 3)) == (0, 2, False)
    assert produce(log, make_batch([b"other"])) == (3, 3, False)
    assert produce(log, pbatch(3, 2)) == (4, 5, False)
    # Retries, before the flush ...
    assert produce(log, pbatch(3, 2)) == (4, 5, True)
    assert produce(log, pbatch(0, 3)) == (0, 2, True)
    pending = log.pending_bytes()
    log.flush()
    # ... and after it.
    assert produce(log, pbatch(0, 3)) == (0, 2, True)
    assert log.pending_bytes() == 0 < pending
    assert log.log_end_offset == 6
    assert len(read_batches(log)) == 3


def test_only_the_last_five_batches_are_remembered(open_log: OpenLog) -> None:
    log = open_log()
    for seq in range(7):
        produce(log, pbatch(seq))
    for seq in range(2, 7):
        assert produce(log, pbatch(seq)) == (seq, seq, True)
    # Older than the cache: not recognised, and out of sequence.
    expect_error(log, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, pbatch(1))


def test_out_of_order_sequences(open_log: OpenLog) -> None:
    log = open_log()
    produce(log, pbatch(5, 2))          # unknown producer: any first sequence is accepted
    expect_error(log, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, pbatch(8))    # gap
    expect_error(log, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, pbatch(6))    # overlap
    expect_error(log, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, pbatch(5, 1))  # partial match
    assert produce(log, pbatch(7)) == (2, 2, False)


def test_sequence_wraps(open_log: OpenLog) -> None:
    log = open_log()
    top = 2**31 - 1
    produce(log, pbatch(top - 1, 2))     # sequences top-1, top
    assert produce(log, pbatch(0, 2)) == (2, 3, False)
    log2 = open_log(topic="wrap-inside")
    produce(log2, pbatch(top, 3))        # a batch crossing the wrap: top, 0, 1
    expect_error(log2, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, pbatch(0))
    assert produce(log2, pbatch(2)) == (3, 3, False)


def test_epochs_fence_and_restart(open_log: OpenLog) -> None:
    log = open_log()
    produce(log, pbatch(0, epoch=3))
    produce(log, pbatch(1, epoch=3))
    expect_error(log, ErrorCode.INVALID_PRODUCER_EPOCH, pbatch(2, epoch=2))
    expect_error(log, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, pbatch(2, epoch=4))
    assert produce(log, pbatch(0, epoch=4)) == (2, 2, False)
    # The old epoch is fenced now, even for what used to be a duplicate.
    expect_error(log, ErrorCode.INVALID_PRODUCER_EPOCH, pbatch(1, epoch=3))
    assert produce(log, pbatch(0, epoch=4)) == (2, 2, True)


def test_producers_are_independent_and_non_idempotent_batches_unchecked(
        open_log: OpenLog) -> None:
    log = open_log()
    produce(log, pbatch(0, pid=1))
    produce(log, pbatch(0, pid=2))
    produce(log, pbatch(1, pid=1))
    plain = make_batch([b"plain"])
    assert produce(log, plain) == (3, 3, False)
    assert produce(log, plain) == (4, 4, False)   # no producer id: never a duplicate


def test_multi_batch_append_is_all_or_nothing(open_log: OpenLog) -> None:
    log = open_log()
    produce(log, pbatch(0))
    # Second batch is out of order: the first (valid) one must not be written either.
    expect_error(log, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, pbatch(1), pbatch(5))
    assert produce(log, pbatch(1), pbatch(2, 3)) == (1, 4, False)
    # Sequences are checked against earlier batches of the same append.
    expect_error(log, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, pbatch(5), pbatch(5))
    assert produce(log, pbatch(5), make_batch([b"x"]), pbatch(6, pid=77)) == (5, 7, False)


def test_dedup_survives_close_and_reopen(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=200)
    for seq in range(6):
        produce(log, pbatch(seq, epoch=1))
    produce(log, pbatch(0, epoch=0, pid=99))
    log.close()
    log = open_log(segment_bytes=200)
    assert produce(log, pbatch(5, epoch=1)) == (5, 5, True)
    expect_error(log, ErrorCode.INVALID_PRODUCER_EPOCH, pbatch(6, epoch=0))
    expect_error(log, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, pbatch(7, epoch=1))
    assert produce(log, pbatch(6, epoch=1)) == (7, 7, False)
    assert produce(log, pbatch(0, epoch=0, pid=99)) == (6, 6, True)


def test_dedup_survives_a_crash(open_log: OpenLog, storage: Storage) -> None:
    log = open_log(segment_bytes=300)
    produce(log, pbatch(0, 2))
    log.flush()
    log.checkpoint()                        # state in the checkpoint: seq 0-1
    produce(log, pbatch(2, 2))
    produce(log, pbatch(4, 2))
    log.flush()                             # durable but only in the log, not the checkpoint
    produce(log, pbatch(6, 2))              # appended, never flushed: lost in the crash
    # Crash: no close; a torn batch at the end of the last segment.
    last = segment_files(log)[-1]
    torn = b"\x00\x00\x00\x00\x00\x00\x00\x06\x00\x00\x01"
    # (rewritten rather than appended: object stores cannot append)
    storage.write_atomic(f"t/0/{last}", storage.read_all(f"t/0/{last}") + torn)
    log = open_log(segment_bytes=300)
    assert log.high_watermark == 6
    assert produce(log, pbatch(4, 2)) == (4, 5, True)    # recovered from the batch headers
    assert produce(log, pbatch(2, 2)) == (2, 3, True)
    assert produce(log, pbatch(0, 2)) == (0, 1, True)    # from the checkpoint
    # The lost batch is not a duplicate: its retry is written (again at offset 6).
    assert produce(log, pbatch(6, 2)) == (6, 7, False)


def test_failed_flush_does_not_poison_durable_state(open_log: OpenLog) -> None:
    log = open_log()
    produce(log, pbatch(0))
    log.flush()
    produce(log, pbatch(1))

    def broken(*args: object) -> None:
        raise OSError(5, "I/O error")

    active = log.segments.by_offset[-1]
    assert active.appender is not None
    active.appender.write = broken  # type: ignore[method-assign,assignment]
    with pytest.raises(KafkaError) as info:
        log.flush()
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    expect_error(log, ErrorCode.KAFKA_STORAGE_ERROR, pbatch(2))
    assert log.read(0, 100)                  # durable data stays readable
    log.close()                              # checkpoints what is durable
    log = open_log()
    assert log.high_watermark == 1
    assert produce(log, pbatch(1)) == (1, 1, False)


def test_idle_producers_expire(open_log: OpenLog) -> None:
    log = open_log()
    log.producer_expiration_ms = 1_000
    produce(log, pbatch(0, pid=1), now_ms=10_000)
    produce(log, pbatch(0, pid=2), now_ms=10_500)
    log.flush()
    log.apply_retention(now_ms=11_200)
    assert set(log.producer_state()) == {"2"}
    # Forgotten: its next batch is accepted whatever the sequence, like an unknown producer.
    assert produce(log, pbatch(7, pid=1), now_ms=11_300) == (2, 2, False)
    expect_error(log, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, pbatch(5, pid=2))
