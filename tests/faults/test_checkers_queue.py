"""The queue checker on crafted histories: each anomaly it claims to find makes it fail, a clean
history passes (and so does what Kafka allows: unknown sends missing, re-delivery after a
rebalance)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.faults.history import History
from tests.faults.queue import check_queue
from tests.faults.recorded_clients import own_ops


class Recorder:
    """A history as the queue workload records one: sends, polls, assignments, final read."""

    def __init__(self) -> None:
        self.history = History()

    def send(self, value: str, partition: int, offset: int | None,
             process: str = "producer-0") -> None:
        op = self.history.invoke(process, "send", {"partition": partition, "value": value})
        if offset is None:
            self.history.info(op, "timed out")
        else:
            self.history.ok(op, {**op.value, "offset": offset})

    def poll(self, *records: tuple[int, int, str], process: str = "consumer-0") -> None:
        op = self.history.invoke(process, "poll")
        self.history.ok(op, [list(r) for r in records])

    def assign(self, *partitions: int, process: str = "consumer-0") -> None:
        self.history.event(process, "assign", list(partitions))

    def check(self, final: dict[int, list[tuple[int, str]]],
              writers: dict[int, list[list[int]]] | None = None) -> Any:
        self.history.event("final-read", "final-read",
                           {p: [list(r) for r in rs] for p, rs in final.items()})
        if writers is not None:     # as JSON keeps them: partitions as strings
            self.history.event("final-writers", "final-writers",
                               {str(p): batches for p, batches in writers.items()})
        return check_queue("queue", self.history.ops())


def clean() -> tuple[Recorder, dict[int, list[tuple[int, str]]]]:
    """Two producers, two partitions, a consumer that polls everything in order."""
    run = Recorder()
    run.send("a", 0, 0)
    run.send("b", 0, 1)
    run.send("c", 1, 0, process="producer-1")
    run.assign(0, 1)
    run.poll((0, 0, "a"), (1, 0, "c"))
    run.poll((0, 1, "b"))
    return run, {0: [(0, "a"), (1, "b")], 1: [(0, "c")]}


def test_a_clean_history_is_valid() -> None:
    run, final = clean()
    verdict = run.check(final)
    assert verdict.valid, verdict
    assert verdict.stats["acked-sends"] == 3


def test_an_empty_history_is_not_valid() -> None:
    assert not Recorder().check({0: []}).valid


def test_unknown_sends_may_be_missing_and_redelivery_after_a_rebalance_is_fine() -> None:
    run, final = clean()
    run.send("d", 1, None)             # timed out: not written, and that is allowed
    run.assign(0)
    run.poll((0, 0, "a"), (0, 1, "b"))  # from the group's committed offset again
    assert run.check(final).valid


@pytest.mark.parametrize(("final", "kind"), [
    ({0: [(0, "a")], 1: [(0, "c")]}, "lost-write"),                 # b missing
    ({0: [(0, "a"), (2, "b")], 1: [(0, "c")]}, "lost-write"),       # b not where acked
    ({0: [(0, "a"), (1, "b"), (2, "a")], 1: [(0, "c")]}, "duplicate"),
    ({0: [(0, "a"), (1, "b"), (2, "z")], 1: [(0, "c")]}, "unexpected-value"),
])
def test_what_the_final_read_shows(final: dict[int, list[tuple[int, str]]], kind: str) -> None:
    run, _ = clean()
    verdict = run.check(final)
    assert not verdict.valid
    assert kind in verdict.anomalies, verdict.anomalies


# The final read of partition 0 with "a" written again at offset 2; its batches' writers:
# base offset, last offset, producer id, epoch, base sequence.
AGAIN = {0: [(0, "a"), (1, "b"), (2, "a")], 1: [(0, "c")]}
FIRST = [0, 1, 5000, 0, 0]          # a and b: producer 5000, epoch 0, sequences 0-1


@pytest.mark.parametrize(("again", "kind"), [
    ([2, 2, 5000, 1, 0], "duplicate-renumbered"),   # the client's epoch bump: allowed
    ([2, 2, 5000, 0, 0], "duplicate"),              # one batch written twice by the broker
    ([2, 2, 5000, 0, 2], "duplicate"),              # one value sent twice in one epoch
    ([2, 2, 7000, 1, 0], "duplicate"),              # another producer's
])
def test_a_value_written_twice_is_allowed_only_as_the_clients_renumbering(
        again: list[int], kind: str) -> None:
    run, _ = clean()
    verdict = run.check(AGAIN, {0: [FIRST, again], 1: [[0, 0, 5001, 0, 0]]})
    assert verdict.valid == (kind == "duplicate-renumbered"), verdict
    if verdict.valid:
        assert verdict.stats["allowed-anomalies"] == {kind: 1}
    else:
        assert kind in verdict.anomalies, verdict.anomalies


def test_an_acknowledged_renumbered_copy_is_where_it_was_acknowledged() -> None:
    run, _ = clean()
    run.send("a", 0, 2)     # the renumbered copy's acknowledgement, with its offset
    verdict = run.check(AGAIN, {0: [FIRST, [2, 2, 5000, 1, 0]], 1: [[0, 0, 5001, 0, 0]]})
    assert verdict.valid, verdict


def test_an_offset_reused_is_inconsistent_offsets() -> None:
    run, final = clean()
    run.poll((0, 1, "x"), process="consumer-1")     # another value at b's offset
    verdict = run.check(final)
    assert "inconsistent-offsets" in verdict.anomalies, verdict.anomalies


def test_a_final_read_going_back_is_nonmonotonic_read() -> None:
    run, _ = clean()
    verdict = run.check({0: [(1, "b"), (0, "a")], 1: [(0, "c")]})
    assert "nonmonotonic-read" in verdict.anomalies, verdict.anomalies


def test_a_producers_sends_acknowledged_out_of_order_are_nonmonotonic_send() -> None:
    run = Recorder()
    run.send("a", 0, 1)
    run.send("b", 0, 0)
    run.poll((0, 0, "b"), (0, 1, "a"))
    verdict = run.check({0: [(0, "b"), (1, "a")]})
    assert "nonmonotonic-send" in verdict.anomalies, verdict.anomalies


def test_a_poll_skipping_a_record_within_an_assignment_is_poll_skip() -> None:
    run, final = clean()
    run.send("d", 0, 2)
    run.assign(0, process="consumer-1")
    run.poll((0, 0, "a"), process="consumer-1")
    run.poll((0, 2, "d"), process="consumer-1")      # b skipped
    run.poll((0, 2, "d"))
    final[0].append((2, "d"))
    verdict = run.check(final)
    assert list(verdict.anomalies) == ["poll-skip"], verdict.anomalies


def test_a_poll_going_back_within_an_assignment_is_nonmonotonic_poll() -> None:
    run, final = clean()
    run.poll((0, 0, "a"))              # consumer-0 saw b already, no rebalance since
    verdict = run.check(final)
    assert list(verdict.anomalies) == ["nonmonotonic-poll"], verdict.anomalies


def test_an_acknowledged_record_the_group_never_polled_is_unseen() -> None:
    run, final = clean()
    run.send("d", 1, 1)
    final[1].append((1, "d"))
    verdict = run.check(final)
    assert list(verdict.anomalies) == ["unseen"], verdict.anomalies


def test_a_clients_fatal_error_fails_the_verdict() -> None:
    run, final = clean()
    run.history.event("producer-1", "fatal", "OUT_OF_ORDER_SEQUENCE_NUMBER")
    verdict = run.check(final)
    assert list(verdict.anomalies) == ["fatal"], verdict.anomalies


def test_each_workload_judges_its_own_operations_in_a_shared_history() -> None:
    """Processes are named after the workload's topic: another workload's final read and
    records in the same history are not this one's."""
    history = History()
    for topic, value in (("queue-a", "a"), ("queue-b", "b")):
        send = history.invoke(f"{topic}/producer-0", "send", {"partition": 0, "value": value})
        history.ok(send, {**send.value, "offset": 0})
        history.ok(history.invoke(f"{topic}/consumer-0", "poll"), [[0, 0, value]])
        history.event(f"{topic}/final-read", "final-read", {0: [[0, value]]})
    history.event("nemesis", "kill", 2)
    for topic in ("queue-a", "queue-b"):
        verdict = check_queue("queue", own_ops(history, topic))
        assert verdict.valid and verdict.stats["acked-sends"] == 1, verdict
