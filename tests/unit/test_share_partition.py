"""A share-partition's record states (bmq.coordinators.share.partition) and their log records
(bmq.coordinators.share.records, shard.replay's reading of them), without a broker."""

from __future__ import annotations

import uuid

import pytest

from bmq.coordinators.share.partition import (
    AckType,
    Acquired,
    DeadLetter,
    RecordState,
    SharePartition,
    ShareSettings,
)
from bmq.coordinators.share.records import StateKey, decode, encode_key, encode_value
from bmq.protocol.errors import ErrorCode

SETTINGS = ShareSettings(lock_ms=1000, delivery_limit=3, backoff_ms=(100, 500))
DLQ = ShareSettings(lock_ms=1000, delivery_limit=2, backoff_ms=(0,), dlq_topic="dlq.t")
ACCEPT, RELEASE, REJECT = [int(AckType.ACCEPT)], [int(AckType.RELEASE)], [int(AckType.REJECT)]


def states(sp: SharePartition) -> list[tuple[int, int, RecordState, int]]:
    return [(r.first, r.last, r.state, r.count) for r in sp.runs]


def test_acquire_new_records_up_to_the_end_given() -> None:
    sp = SharePartition(10)
    assert sp.acquire("a", 5, 15, 0, SETTINGS) == [Acquired(10, 14, 1)]
    assert sp.acquire("b", 500, 20, 0, SETTINGS) == [Acquired(15, 19, 1)]
    assert sp.acquire("b", 500, 20, 0, SETTINGS) == []
    assert sp.end_offset == 20 and sp.start_offset == 10


def test_read_committed_archives_what_it_skips_and_keeps_the_rest_acquired() -> None:
    """The skipped parts of an acquisition (aborted transactions, markers) are archived at
    once, the start offset passes them, and what is left stays acquired with its count."""
    sp = SharePartition(0)
    got = sp.acquire("a", 20, 12, 0, SETTINGS)
    sp.take_changes()
    kept = sp.archive_acquired(got, [(0, 2), (3, 3), (7, 7), (11, 11)])
    assert kept == [Acquired(4, 6, 1), Acquired(8, 10, 1)]
    assert sp.start_offset == 4
    assert states(sp) == [(4, 6, RecordState.ACQUIRED, 1), (7, 7, RecordState.ARCHIVED, 1),
                          (8, 10, RecordState.ACQUIRED, 1), (11, 11, RecordState.ARCHIVED, 1)]
    assert [(r.first, r.last, r.state) for r in sp.take_changes()] == [
        (0, 2, RecordState.ARCHIVED), (3, 3, RecordState.ARCHIVED),
        (7, 7, RecordState.ARCHIVED), (11, 11, RecordState.ARCHIVED)]
    sp.acknowledge(4, 6, ACCEPT, 0, SETTINGS)
    sp.acknowledge(8, 10, ACCEPT, 0, SETTINGS)
    assert (sp.start_offset, sp.runs) == (12, [])


def test_accept_advances_the_start_offset_only_past_a_finished_prefix() -> None:
    sp = SharePartition(0)
    sp.acquire("a", 10, 10, 0, SETTINGS)
    sp.acknowledge(5, 9, ACCEPT, 0, SETTINGS)
    assert sp.start_offset == 0
    sp.acknowledge(0, 4, ACCEPT, 0, SETTINGS)
    assert sp.start_offset == 10 and sp.runs == []


def test_ack_checks_change_nothing_when_they_fail() -> None:
    sp = SharePartition(0)
    sp.acquire("a", 10, 10, 0, SETTINGS)
    sp.take_changes()
    before = states(sp)
    assert sp.check_ack("b", 0, 3, ACCEPT) == ErrorCode.INVALID_RECORD_STATE     # not b's
    assert sp.check_ack("a", 8, 12, ACCEPT) == ErrorCode.INVALID_RECORD_STATE    # past the end
    assert sp.check_ack("a", 3, 2, ACCEPT) == ErrorCode.INVALID_REQUEST
    assert sp.check_ack("a", 0, 3, [1, 1]) == ErrorCode.INVALID_REQUEST   # 2 types, 4 offsets
    assert sp.check_ack("a", 0, 3, [9]) == ErrorCode.INVALID_REQUEST
    assert sp.check_ack("a", 0, 3, ACCEPT) == ErrorCode.NONE
    sp.acknowledge(0, 3, ACCEPT, 0, SETTINGS)
    assert sp.check_ack("a", 0, 0, ACCEPT) == ErrorCode.INVALID_RECORD_STATE     # done already
    assert states(sp)[0][:2] == (4, 9) and before != states(sp)


def test_release_waits_for_the_back_off_of_its_delivery_count_and_later_records_flow() -> None:
    sp = SharePartition(0)
    sp.acquire("a", 3, 3, 0, SETTINGS)
    sp.acknowledge(1, 1, RELEASE, 1000, SETTINGS)     # first delivery failed: 100 ms
    sp.acknowledge(0, 0, ACCEPT, 1000, SETTINGS)
    sp.acknowledge(2, 2, ACCEPT, 1000, SETTINGS)
    assert sp.acquire("b", 10, 10, 1050, SETTINGS) == [Acquired(3, 9, 1)]   # behind it: flows
    assert sp.acquire("b", 10, 10, 1099, SETTINGS) == []
    assert sp.due(1050, 1100) == (False, True, False)
    assert sp.acquire("b", 10, 10, 1100, SETTINGS) == [Acquired(1, 1, 2)]
    sp.acknowledge(1, 1, RELEASE, 2000, SETTINGS)     # second failure: 500 ms (the last repeats)
    assert sp.acquire("c", 10, 10, 2499, SETTINGS) == []
    assert sp.acquire("c", 10, 10, 2500, SETTINGS) == [Acquired(1, 1, 3)]


def test_lock_expiry_releases_and_the_delivery_limit_archives() -> None:
    sp = SharePartition(0)
    for attempt in range(1, 4):
        now = attempt * 10_000
        assert sp.acquire("a", 5, 2, now, SETTINGS) == [Acquired(0, 1, attempt)]
        assert sp.due(now, now + 999) == (False, False, False)
        assert sp.due(now, now + 1000)[0]
        assert sp.expire_locks(now + 1000, SETTINGS) == []
    assert sp.start_offset == 2 and sp.runs == []     # archived at 3 deliveries


def test_reject_and_the_limit_go_to_the_dead_letter_topic_before_archiving() -> None:
    sp = SharePartition(0)
    sp.acquire("a", 4, 4, 0, DLQ)
    dead = sp.acknowledge(0, 3, [1, 3, 2, 1], 0, DLQ)
    assert dead == [DeadLetter(1, 1, 1, "rejected")]
    assert states(sp)[0] == (1, 1, RecordState.ARCHIVING, 1) and sp.start_offset == 1
    assert sp.acquire("a", 4, 4, 0, DLQ) == [Acquired(2, 2, 2)]   # ARCHIVING is not delivered
    assert sp.acknowledge(2, 2, RELEASE, 0, DLQ) == [DeadLetter(2, 2, 2, "delivery.count.limit")]
    sp.archive(DeadLetter(1, 1, 1, "rejected"))
    sp.archive(DeadLetter(2, 2, 2, "delivery.count.limit"))
    assert sp.start_offset == 4 and sp.runs == []


def test_an_unwritten_dead_letter_keeps_its_reason_through_the_log() -> None:
    """A record rejected on its last allowed delivery is a rejection, also when its dead
    letter is written after a restart (the state log says why it is ARCHIVING)."""
    key = StateKey("g", uuid.uuid4(), 0)
    sp = SharePartition(0)
    sp.acquire("a", 2, 2, 0, DLQ)
    sp.acknowledge(0, 1, RELEASE, 0, DLQ)
    sp.acquire("a", 2, 2, 0, DLQ)                       # second delivery: the limit
    dead = sp.acknowledge(0, 1, [3, 2], 0, DLQ)         # 0 rejected, 1 released at the limit
    assert dead == [DeadLetter(0, 0, 2, "rejected"), DeadLetter(1, 1, 2, "delivery.count.limit")]
    record = decode(encode_key(key, True), encode_value(sp.start_offset, list(sp.runs)))
    assert record is not None and record.runs is not None
    replayed = SharePartition(record.start_offset)
    replayed.apply(record.start_offset, record.runs)
    assert replayed.unwritten_dead_letters(DLQ) == dead
    # A record of the first format (no reason) still reads; the reason is then guessed.
    old = bytearray(encode_value(0, [])[:-4])      # no leader epoch either
    old[1] = 0
    assert decode(encode_key(key, True), bytes(old)) is not None


def test_a_member_closing_its_session_releases_only_its_records() -> None:
    sp = SharePartition(0)
    sp.acquire("a", 2, 2, 0, SETTINGS)
    sp.acquire("b", 2, 4, 0, SETTINGS)
    sp.expire_locks(0, SETTINGS, member="a")
    assert [(r.first, r.last, r.state, r.member) for r in sp.runs] == [
        (0, 1, RecordState.AVAILABLE, ""), (2, 3, RecordState.ACQUIRED, "b")]


def test_renew_extends_the_lock() -> None:
    sp = SharePartition(0)
    sp.acquire("a", 1, 1, 0, SETTINGS)
    sp.acknowledge(0, 0, [int(AckType.RENEW)], 900, SETTINGS)
    assert sp.due(0, 1500) == (False, False, False) and sp.due(0, 1900)[0]


@pytest.mark.parametrize("snapshot_every", [1, 3, 1000])
def test_replaying_snapshots_and_updates_rebuilds_the_state(snapshot_every: int) -> None:
    """What the log keeps, replayed (snapshot + updates, in order), is the live state, with
    acquired records deliverable again after a restart."""
    key = StateKey("g", uuid.uuid4(), 3)
    live = SharePartition(5)
    log: list[tuple[bytes, bytes]] = [(encode_key(key, True), encode_value(5, []))]
    steps = [
        lambda now: live.acquire("a", 7, 12, now, SETTINGS),
        lambda now: live.acknowledge(5, 6, ACCEPT, now, SETTINGS),
        lambda now: live.acknowledge(8, 9, RELEASE, now, SETTINGS),
        lambda now: live.acquire("b", 4, 16, now, SETTINGS),
        lambda now: live.acknowledge(7, 7, ACCEPT, now, SETTINGS),
        lambda now: live.acknowledge(12, 13, [1, 4], now, SETTINGS),
        lambda now: live.expire_locks(now + 5000, SETTINGS),
    ]
    for i, step in enumerate(steps, start=1):
        step(i * 10)
        changes = live.take_changes()
        snapshot = i % snapshot_every == 0
        log.append((encode_key(key, snapshot),
                    encode_value(live.start_offset, list(live.runs) if snapshot else changes)))
    replayed: SharePartition | None = None
    for k, v in log:
        record = decode(k, v)
        assert record is not None and record.key == key
        if record.snapshot or replayed is None:
            replayed = SharePartition(record.start_offset)
        replayed.apply(record.start_offset, record.runs)
    assert replayed is not None
    assert replayed.start_offset == live.start_offset
    assert [(r.first, r.last, r.state, r.count, r.available_at) for r in replayed.runs] == \
        [(r.first, r.last, r.state, r.count, r.available_at) for r in live.runs]
    replayed.restarted()
    assert all(r.member == "" and r.deadline == 0 for r in replayed.runs
               if r.state == RecordState.ACQUIRED)


def test_a_record_held_at_its_last_delivery_when_its_leader_died_is_given_up() -> None:
    """Seen by tests/faults' share workload under kill -9 (limit 3): a record acquired for the
    third time when its leader died was delivered a fourth time by the next leader. The locks
    of a replayed state expire as any lock does: the limit gives the record up."""
    sp = SharePartition(0)
    for attempt in range(1, 4):
        now = attempt * 10_000
        assert sp.acquire("a", 1, 1, now, SETTINGS) == [Acquired(0, 0, attempt)]
        if attempt < 3:
            sp.acknowledge(0, 0, RELEASE, now, SETTINGS)
    sp.restarted()
    assert sp.acquire("b", 1, 1, 40_000, SETTINGS) == []
    assert sp.due(40_000, 40_000)[0]
    assert sp.expire_locks(40_000, SETTINGS) == []
    assert sp.start_offset == 1 and sp.runs == []       # archived at 3 deliveries


def test_finished_records_behind_a_waiting_one_stay_one_run() -> None:
    """A released record with a long back-off holds the start offset; the records acquired and
    accepted after it, fetch after fetch, are kept as one run, not one per fetch."""
    sp = SharePartition(0)
    sp.acquire("a", 1, 1, 0, SETTINGS)
    sp.acknowledge(0, 0, RELEASE, 0, ShareSettings(backoff_ms=(10**9,)))
    for n in range(100):
        first = 1 + n * 10
        assert sp.acquire("a", 10, first + 10, 0, SETTINGS) == [Acquired(first, first + 9, 1)]
        sp.acknowledge(first, first + 4, ACCEPT, 0, SETTINGS)
        sp.acknowledge(first + 5, first + 9, ACCEPT, 0, SETTINGS)
    assert states(sp) == [(0, 0, RecordState.AVAILABLE, 1), (1, 1000, RecordState.ACKNOWLEDGED, 1)]
