"""The share group checker on crafted histories: a clean one is valid, and each anomaly the
checker claims to find makes it fail (tests/faults/share_queue.py)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError

from tests.faults.history import History, Op, Outcome
from tests.faults.recorded_clients import client_error
from tests.faults.share_queue import DeadLetter, check_share

LIMIT = 3


class Crafted:
    """A history written by hand: each operation at the (start, end) times given."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def add(self, process: str, f: str, value: Any, start: int, end: int,
            outcome: Outcome = "ok", error: str | None = None) -> Op:
        op = Op(len(self.ops), process, f, value, start, outcome, end, error)
        self.ops.append(op)
        return op

    def send(self, value: int, partition: int, offset: int, outcome: Outcome = "ok") -> None:
        self.add("producer-0", "send", {"value": value, "partition": partition,
                                        "offset": offset}, 0, 1, outcome)

    def poll(self, process: str, start: int, *records: tuple[int, int, int, int]) -> None:
        self.add(process, "poll", [list(r) for r in records], start, start + 1)

    def ack(self, process: str, start: int, partition: int, acks: list[tuple[int, int, str]],
            outcome: Outcome = "ok", error: str | None = None) -> None:
        self.add(process, "ack", {"partition": partition, "acks": [list(a) for a in acks]},
                 start, start + 1, outcome, error)


def clean() -> tuple[Crafted, list[DeadLetter]]:
    """Values 0 and 1 accepted at once, 29 rejected, 41 released to the delivery limit, 2
    accepted after its first acknowledgement met an expired lock, 3 accepted with an answer
    lost."""
    h = Crafted()
    for value, partition, offset in [(0, 0, 0), (1, 0, 1), (2, 0, 2), (29, 1, 0), (41, 1, 1),
                                     (3, 1, 2)]:
        h.send(value, partition, offset)
    h.poll("c0", 10, (0, 0, 0, 1), (0, 1, 1, 1), (0, 2, 2, 1))
    h.ack("c0", 12, 0, [(0, 0, "accept"), (1, 1, "accept")])
    h.ack("c0", 12, 0, [(2, 2, "accept")], "fail", "INVALID_RECORD_STATE")
    h.poll("c1", 20, (0, 2, 2, 2))
    h.ack("c1", 22, 0, [(2, 2, "accept")])
    h.poll("c1", 10, (1, 0, 29, 1), (1, 1, 41, 1))
    h.ack("c1", 12, 1, [(0, 29, "reject"), (1, 41, "release")])
    for count, start in [(2, 30), (3, 40)]:
        h.poll("c0", start, (1, 1, 41, count))
        h.ack("c0", start + 2, 1, [(1, 41, "release")])
    h.poll("c0", 50, (1, 2, 3, 1))
    h.ack("c0", 52, 1, [(2, 3, "accept")], "info", "_TRANSPORT")
    letters = [DeadLetter(1, 0, 29, "rejected", 1), DeadLetter(1, 1, 41,
                                                               "delivery.count.limit", 3)]
    return h, letters


def anomalies(h: Crafted, letters: list[DeadLetter]) -> set[str]:
    verdict = check_share(h.ops, letters, LIMIT)
    assert not verdict.valid
    return set(verdict.anomalies)


def test_a_clean_history_is_valid() -> None:
    h, letters = clean()
    verdict = check_share(h.ops, letters, LIMIT)
    assert verdict.valid, verdict.anomalies
    assert verdict.stats["accepted"] == 3
    assert verdict.stats["indeterminate"] == 1
    assert verdict.stats["redeliveries"] == 3


def test_a_dead_letter_copied_twice_is_valid() -> None:
    h, letters = clean()
    assert check_share(h.ops, letters + letters[:1], LIMIT).valid


def test_nothing_accepted_is_not_valid() -> None:
    verdict = check_share([], [], LIMIT)
    assert not verdict.valid and not verdict.anomalies


def test_two_successful_accepts_of_one_record() -> None:
    h, letters = clean()
    h.poll("c1", 11, (0, 0, 0, 2))      # while c0 still held it: a lock broken
    h.ack("c1", 15, 0, [(0, 0, "accept")])
    assert anomalies(h, letters) == {"duplicate-ack"}


def test_an_accept_and_a_reject_of_one_record() -> None:
    h, letters = clean()
    h.poll("c0", 11, (1, 0, 29, 2))
    h.ack("c0", 14, 1, [(0, 29, "accept")])
    assert anomalies(h, letters) == {"duplicate-ack", "accepted-and-dead-lettered"}


def test_a_delivery_after_a_successful_accept() -> None:
    h, letters = clean()
    h.poll("c1", 60, (0, 0, 0, 2))
    assert anomalies(h, letters) == {"delivered-after-ack"}


def test_a_late_answer_of_an_earlier_acquisition_after_an_accept() -> None:
    """Seen under SIGSTOP: a frozen leader's answer, acquired before another consumer accepted
    the record, reaches its consumer after the accept; that consumer's accept fails."""
    h, letters = clean()
    h.send(4, 0, 3)
    h.poll("c0", 60, (0, 3, 4, 2))
    h.ack("c0", 62, 0, [(3, 4, "accept")])
    h.poll("c1", 70, (0, 3, 4, 1))
    h.ack("c1", 72, 0, [(3, 4, "accept")], "fail", "INVALID_RECORD_STATE")
    assert check_share(h.ops, letters, LIMIT).valid


def test_a_record_never_settled_is_lost() -> None:
    h, letters = clean()
    h.send(4, 0, 3)
    h.poll("c0", 60, (0, 3, 4, 1))
    h.ack("c0", 62, 0, [(3, 4, "release")])
    assert anomalies(h, letters) == {"lost"}


def test_a_record_never_delivered_is_lost() -> None:
    h, letters = clean()
    h.send(4, 0, 3)
    assert anomalies(h, letters) == {"lost"}


def test_a_failed_accept_then_a_redelivery_left_unsettled_is_lost() -> None:
    h, letters = clean()
    h.send(4, 0, 3)
    h.poll("c0", 60, (0, 3, 4, 1))
    h.ack("c0", 62, 0, [(3, 4, "accept")], "fail", "INVALID_RECORD_STATE")
    h.poll("c1", 70, (0, 3, 4, 2))
    assert anomalies(h, letters) == {"lost"}


def test_a_rejected_record_missing_from_the_dead_letter_topic_is_lost() -> None:
    h, letters = clean()
    assert anomalies(h, letters[1:]) == {"lost"}


def test_an_unsent_record_produced_twice_or_misplaced() -> None:
    h, letters = clean()
    h.poll("c0", 60, (0, 5, 999, 1))
    assert anomalies(h, letters) == {"phantom"}
    h, letters = clean()
    h.poll("c0", 60, (0, 5, 1, 1))
    assert anomalies(h, letters) == {"wrong-value"}
    h, letters = clean()
    h.send(7, 0, 0)
    assert "offset-reused" in anomalies(h, letters)


def test_delivery_counts_out_of_range_or_not_growing() -> None:
    h, letters = clean()
    h.poll("c0", 60, (1, 1, 41, LIMIT + 1))
    assert anomalies(h, letters) == {"delivery-count"}
    h, letters = clean()
    h.send(4, 0, 3)
    h.poll("c0", 60, (0, 3, 4, 0))
    h.ack("c0", 62, 0, [(3, 4, "accept")])
    assert anomalies(h, letters) == {"delivery-count"}
    h, letters = clean()
    h.send(4, 0, 3)
    h.poll("c0", 60, (0, 3, 4, 2))
    h.poll("c1", 70, (0, 3, 4, 2))     # another acquisition with the same count
    h.ack("c1", 72, 0, [(3, 4, "accept")])
    assert anomalies(h, letters) == {"delivery-count"}


@pytest.mark.parametrize("letter", [
    DeadLetter(0, 0, 0, "rejected", 1),                  # accepted, and copied too
    DeadLetter(0, 1, 1, "delivery.count.limit", 1),
])
def test_a_dead_letter_of_an_accepted_record(letter: DeadLetter) -> None:
    h, letters = clean()
    assert "accepted-and-dead-lettered" in anomalies(h, [*letters, letter])


@pytest.mark.parametrize(("copy_epoch", "valid"), [(1, True), (0, False)])
def test_a_delivery_of_a_values_renumbered_copy(copy_epoch: int, valid: bool) -> None:
    """Value 1 acknowledged at offset 1, and written again at offset 5 (its ack lost): by the
    client under its next epoch, the same record; under the same epoch, the broker's doing."""
    h, letters = clean()
    h.poll("c0", 60, (0, 5, 1, 1))
    h.ack("c0", 62, 0, [(5, 1, "accept")])
    writers = {0: [[0, 2, 5000, 0, 0], [5, 5, 5000, copy_epoch, 1]],
               1: [[0, 2, 5001, 0, 0]]}
    verdict = check_share(h.ops, letters, LIMIT, writers=writers)
    assert verdict.valid == valid, verdict.anomalies
    if valid:
        assert verdict.stats["renumbered-copies"] == 1
    else:
        assert set(verdict.anomalies) == {"wrong-value"}


def test_dead_letters_without_a_reason_or_of_another_record() -> None:
    h, letters = clean()
    h.send(4, 0, 3)
    h.poll("c0", 60, (0, 3, 4, 1))
    h.ack("c0", 62, 0, [(3, 4, "release")])
    assert anomalies(h, [*letters, DeadLetter(0, 3, 4, "rejected", 1)]) == {
        "unexplained-dead-letter"}
    assert anomalies(h, [*letters, DeadLetter(0, 3, 4, "delivery.count.limit", 1)]) == {
        "unexplained-dead-letter"}
    assert anomalies(h, [*letters, DeadLetter(0, 3, 2, "delivery.count.limit", 3)]) == {
        "wrong-value", "lost"}


def test_a_fatal_client_error() -> None:
    h, letters = clean()
    op = h.add("c0", "poll", None, 60, 61, "fail", "FENCED_MEMBER_EPOCH")
    op.extra["fatal"] = True
    assert anomalies(h, letters) == {"fatal-error"}


def test_a_call_refused_after_a_fatal_error_counts_as_fatal() -> None:
    """Seen under SIGSTOP: an idempotent producer's produce() raised _FATAL (its fatal error
    itself was never served to error_cb); that op alone must make the verdict fail."""
    history = History()
    op = history.invoke("producer-0", "send", {"value": 9})
    history.fail(op, client_error(op, KafkaError(KafkaError._FATAL)))
    h, letters = clean()
    h.ops.append(op)
    assert anomalies(h, letters) == {"fatal-error"}


def test_acknowledgements_without_an_offset_say_nothing_of_where() -> None:
    """librdkafka reports some acknowledgements with offset -1 (None here): several such values
    of one partition are neither one offset reused nor wrongly delivered (seen in a clock-jump
    run before the checker knew)."""
    h, letters = clean()
    for value in (50, 51):
        h.add("producer-0", "send", {"value": value, "partition": 0, "offset": None}, 0, 1, "ok")
    assert "offset-reused" not in anomalies(h, letters)
