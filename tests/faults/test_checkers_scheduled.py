"""The scheduled delivery checker on crafted histories: a clean one is valid, and each
anomaly the checker claims to find makes it fail (tests/faults/scheduled.py)."""

from __future__ import annotations

from tests.faults.history import Op, Outcome
from tests.faults.recorded_clients import ReadRecord
from tests.faults.scheduled import ALLOWANCE_MS, SCHEDULED_AT, check_scheduled


class Crafted:
    def __init__(self) -> None:
        self.ops: list[Op] = []

    def send(self, value: int, due_ms: int, partition: int, outcome: Outcome = "ok") -> None:
        self.ops.append(Op(len(self.ops), "producer-0", "send", {
            "value": value, "due_ms": due_ms, "partition": partition}, 0, outcome, 1))

    def poll(self, process: str, start: int, wall_ms: int, *records: tuple[int, int, int]) -> None:
        op = Op(len(self.ops), process, "poll", [list(r) for r in records], start, "ok",
                start + 1)
        op.extra["wall_ms"] = wall_ms
        self.ops.append(op)

    def assign(self, process: str, at: int, partitions: list[int]) -> None:
        self.ops.append(Op(len(self.ops), process, "assign", partitions, at, "ok", at))


def clean() -> tuple[Crafted, list[ReadRecord]]:
    """Value 0 due at 1000 on partition 0, value 1 due at 2000 on partition 1 (delivered
    twice: again to another consumer after a rebalance), value 2's send of unknown outcome
    never delivered."""
    h = Crafted()
    h.send(0, 1000, 0)
    h.send(1, 2000, 1)
    h.send(2, 2500, 1, "info")
    h.poll("c0", 10, 1000, (0, 5, 0))
    h.poll("c0", 20, 2003, (1, 3, 1))
    h.assign("c1", 30, [1])
    h.poll("c1", 31, 2010, (1, 3, 1))
    return h, [ReadRecord(0, 5, 0, {SCHEDULED_AT: "900"}),
               ReadRecord(1, 3, 1, {SCHEDULED_AT: "901"})]


def anomalies(h: Crafted, read: list[ReadRecord]) -> set[str]:
    verdict = check_scheduled(h.ops, read)
    assert not verdict.valid
    return set(verdict.anomalies)


def test_a_clean_history_is_valid() -> None:
    h, read = clean()
    verdict = check_scheduled(h.ops, read)
    assert verdict.valid, verdict.anomalies
    assert verdict.stats["delivered-again"] == 1
    assert verdict.stats["lateness_ms"]["max"] == 3


def test_nothing_delivered_is_not_valid() -> None:
    h = Crafted()
    h.send(0, 1000, 0)
    verdict = check_scheduled(h.ops, [ReadRecord(0, 0, 0, {})])
    assert not verdict.valid and not verdict.anomalies


def test_a_record_delivered_before_its_time() -> None:
    h, read = clean()
    h.poll("c1", 40, 1000 - ALLOWANCE_MS, (0, 5, 0))     # within the clocks' granularity
    h.assign("c1", 39, [0])
    assert check_scheduled(h.ops, read).valid
    h.poll("c2", 40, 1000 - ALLOWANCE_MS - 1, (0, 5, 0))
    assert anomalies(h, read) == {"early"}


def test_a_record_lost() -> None:
    h, read = clean()
    h.send(3, 2500, 0)
    assert anomalies(h, read) == {"lost"}


def test_a_record_delivered_twice_into_the_partition() -> None:
    """One held record (one ``bmq.scheduled.at``) at two offsets: the timer's duplicate."""
    h, read = clean()
    assert anomalies(h, [*read, ReadRecord(0, 6, 0, {SCHEDULED_AT: "900"})]) == {"duplicate"}
    assert anomalies(h, [*read, ReadRecord(0, 6, 0, {})]) == {"duplicate"}


def test_a_record_produced_again_is_counted_not_judged() -> None:
    """A value held twice (two stamps): the producer sent it again (librdkafka renumbers what
    it holds after an epoch bump); any broker takes that as a new record."""
    h, read = clean()
    verdict = check_scheduled(h.ops, [*read, ReadRecord(0, 6, 0, {SCHEDULED_AT: "950"})])
    assert verdict.valid and verdict.stats["resent-copies"] == 1


def test_a_record_in_another_partition() -> None:
    h, read = clean()
    read[1] = ReadRecord(0, 6, 1, {})
    assert "wrong-partition" in anomalies(h, read)


def test_a_delivery_not_of_the_record_at_its_offset() -> None:
    h, read = clean()
    h.poll("c2", 40, 3000, (0, 5, 1))
    assert anomalies(h, read) == {"wrong-value"}
    h, read = clean()
    h.poll("c0", 40, 3000, (0, 9, 99))
    assert anomalies(h, read) == {"phantom"}
    h, read = clean()
    assert anomalies(h, [*read, ReadRecord(0, 9, 99, {})]) == {"phantom"}


def test_a_consumer_given_a_record_twice_without_a_rebalance() -> None:
    h, read = clean()
    h.poll("c0", 40, 3000, (0, 5, 0))
    assert anomalies(h, read) == {"duplicate-delivery"}
    h.assign("c0", 39, [0, 1])
    assert check_scheduled(h.ops, read).valid


def test_a_fatal_client_error() -> None:
    h, read = clean()
    h.poll("c0", 40, 3000)
    h.ops[-1].extra["fatal"] = True
    assert anomalies(h, read) == {"fatal-error"}
