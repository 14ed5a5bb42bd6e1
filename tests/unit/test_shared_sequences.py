"""Producer sequence numbers shared by two logs (a partition and its timer log, which holds
idempotent producers' batches while scheduling is on): a producer's batch continues its newest
batch in either log; a retry of a batch written to the other log is DUPLICATE_SEQUENCE_NUMBER
(Kafka's answer for a duplicate whose offsets it cannot give); a gap is still refused."""

from __future__ import annotations

import pytest

from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.records import BatchHeader, read_header
from bmq.storage.producer_state import ProducerStateTable
from tests.integration.kwire import Record, build_record_batch

PID = 7


def _batch(first_seq: int, count: int, epoch: int = 0) -> BatchHeader:
    records = [Record(b"k", b"v%d" % i, []) for i in range(count)]
    return read_header(build_record_batch(records, base_offset=0, producer_id=PID,
                                          producer_epoch=epoch, base_sequence=first_seq))


def _append(table: ProducerStateTable, header: BatchHeader, offset: int, now: int) -> None:
    table.record(PID, header.producer_epoch, header.base_sequence, header.last_sequence,
                 offset, offset + header.last_offset_delta, 0, now)


def test_a_batch_continues_the_newest_of_either_log() -> None:
    partition, timer = ProducerStateTable(), ProducerStateTable()
    _append(partition, _batch(0, 10), 0, now=1)          # scheduling off
    _append(timer, _batch(10, 10), 0, now=2)             # on: held in the timer log
    following = _batch(20, 5)                            # off again
    with pytest.raises(KafkaError) as refused:
        partition.check([following])                     # alone, the partition sees a gap
    assert refused.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert partition.check([following], timer.producers) is None
    _append(partition, following, 10, now=3)
    # Now the partition's entry is the newer one: the timer log's is not taken again.
    assert timer.check([_batch(25, 1)], partition.producers) is None
    with pytest.raises(KafkaError) as gap:
        partition.check([_batch(27, 1)], timer.producers)
    assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_retry_of_a_batch_in_the_other_log_is_a_duplicate() -> None:
    partition, timer = ProducerStateTable(), ProducerStateTable()
    _append(partition, _batch(0, 10), 0, now=1)
    _append(timer, _batch(10, 10), 0, now=2)
    with pytest.raises(KafkaError) as duplicate:
        partition.check([_batch(10, 10)], timer.producers)
    assert duplicate.value.code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER
    # A retry of one in this log is answered with its offsets here, as always.
    cached = partition.check([_batch(0, 10)], timer.producers)
    assert cached is not None and (cached.base_offset, cached.last_offset) == (0, 9)


def test_a_new_epoch_in_the_other_log_wins() -> None:
    partition, timer = ProducerStateTable(), ProducerStateTable()
    _append(partition, _batch(0, 10), 0, now=5)
    _append(timer, _batch(0, 3, epoch=1), 0, now=4)      # a bumped epoch, whatever the clock
    assert partition.check([_batch(3, 1, epoch=1)], timer.producers) is None
    with pytest.raises(KafkaError) as fenced:
        partition.check([_batch(10, 1)], timer.producers)
    assert fenced.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
