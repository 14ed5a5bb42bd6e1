"""The Elle-style checker on crafted transactions: each anomaly it claims to find makes it fail,
a clean history passes; and the list-append workload's judgement by Kafka's promises (write
cycles allowed, a cycle of reads or an aborted read not)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.faults import elle
from tests.faults.elle import Txn
from tests.faults.history import History
from tests.faults.list_append import check_list_append

A0 = Txn(0, "p0", "ok", appends=((0, "a", 0), (1, "b", 0)))     # the keys' first values


def final(*logs: list[tuple[int, str]]) -> elle.Log:
    return dict(enumerate(logs))


def anomalies(txns: list[Txn], log: elle.Log, ww_deps: bool = False) -> dict[str, Any]:
    verdict = elle.check("test", txns, log, ww_deps=ww_deps)
    assert verdict.valid == (not verdict.anomalies)
    return verdict.anomalies


def test_a_clean_history_is_valid() -> None:
    reader = Txn(1, "p1", "ok", appends=((0, "c", 1),), reads=((0, 0, "a"),))
    aborted = Txn(2, "p2", "fail", appends=((1, "x", 1),))
    verdict = elle.check("test", [A0, reader, aborted], final([(0, "a"), (1, "c")], [(0, "b")]),
                         ww_deps=True)
    assert verdict.valid, verdict
    assert verdict.stats["ok-txns"] == 2 and verdict.stats["aborted-txns"] == 1


def test_nothing_committed_is_not_valid() -> None:
    assert not elle.check("test", [Txn(0, "p0", "fail", appends=((0, "a", 0),))], {0: []}).valid


def test_reading_an_aborted_value_is_G1a() -> None:
    aborted = Txn(1, "p1", "fail", appends=((0, "x", 1),))
    reader = Txn(2, "p2", "ok", reads=((0, 1, "x"),))
    assert list(anomalies([A0, aborted, reader], final([(0, "a")], [(0, "b")]))) == ["G1a"]


def test_an_aborted_value_in_the_final_read_is_G1a() -> None:
    aborted = Txn(1, "p1", "fail", appends=((0, "x", 1),))
    found = anomalies([A0, aborted], final([(0, "a"), (1, "x")], [(0, "b")]))
    assert list(found) == ["G1a"] and found["G1a"][0]["reader"] == "final-read"


def test_reading_its_own_uncommitted_value_is_a_precommitted_read() -> None:
    own = Txn(1, "p1", "ok", appends=((0, "c", 1),), reads=((0, 1, "c"),))
    found = anomalies([A0, own], final([(0, "a"), (1, "c")], [(0, "b")]))
    assert "precommitted-read" in found, found


def test_reading_a_value_its_writer_appended_more_after_is_G1b() -> None:
    writer = Txn(1, "p1", "ok", appends=((0, "c", 1), (0, "d", 2)))
    reader = Txn(2, "p2", "ok", reads=((0, 0, "a"), (0, 1, "c")))
    found = anomalies([A0, writer, reader], final([(0, "a"), (1, "c"), (2, "d")], [(0, "b")]))
    assert set(found) == {"G1b", "G-single"}, found       # read c, not d: reader -rw-> writer


def test_two_appends_after_reading_the_same_version_are_a_lost_update() -> None:
    t1 = Txn(1, "p1", "ok", appends=((0, "c", 1),), reads=((0, 0, "a"),))
    t2 = Txn(2, "p2", "ok", appends=((0, "d", 2),), reads=((0, 0, "a"),))
    found = anomalies([A0, t1, t2], final([(0, "a"), (1, "c"), (2, "d")], [(0, "b")]))
    assert "lost-update" in found, found


def test_a_committed_value_missing_from_the_final_read_is_a_lost_write() -> None:
    lost = Txn(1, "p1", "ok", appends=((0, "c", 1),))
    found = anomalies([A0, lost], final([(0, "a")], [(0, "b")]))
    assert list(found) == ["lost-write"], found
    found = anomalies([A0], final([(0, "a")], []))
    assert set(found) == {"lost-write", "partial-transaction"}, found


def test_a_transaction_only_partly_visible_is_a_partial_transaction() -> None:
    unknown = Txn(1, "p1", "info", appends=((0, "c", None), (1, "d", None)))
    found = anomalies([A0, unknown], final([(0, "a"), (1, "c")], [(0, "b")]))
    assert list(found) == ["partial-transaction"], found


def test_two_values_at_one_offset_are_inconsistent_offsets() -> None:
    reader = Txn(1, "p1", "ok", reads=((0, 0, "z"),))
    found = anomalies([A0, reader], final([(0, "a")], [(0, "b")]))
    assert "inconsistent-offsets" in found, found


def test_one_value_at_two_offsets_is_a_duplicate() -> None:
    found = anomalies([A0], final([(0, "a"), (1, "a")], [(0, "b")]))
    assert "duplicate" in found, found


def test_a_producers_appends_out_of_offset_order_are_nonmonotonic_send() -> None:
    inverted = Txn(1, "p1", "ok", appends=((0, "c", 2), (0, "d", 1)))
    found = anomalies([A0, inverted], final([(0, "a"), (1, "d"), (2, "c")], [(0, "b")]))
    assert "nonmonotonic-send" in found, found
    first = Txn(0, "p0", "ok", appends=((0, "a", 3),))
    later = Txn(1, "p0", "ok", appends=((0, "b", 2),))         # p0's next transaction
    found = anomalies([first, later], final([(2, "b"), (3, "a")]))
    assert list(found) == ["nonmonotonic-send"], found


# T1 and T2 interleave their appends to keys 0 and 1 (T1 first on 0, T2 first on 1).
T1 = Txn(1, "p1", "ok", appends=((0, "c", 1), (1, "e", 2)))
T2 = Txn(2, "p2", "ok", appends=((0, "d", 2), (1, "f", 1)))
INTERLEAVED = final([(0, "a"), (1, "c"), (2, "d")], [(0, "b"), (1, "f"), (2, "e")])


def test_interleaved_appends_are_a_write_cycle_G0() -> None:
    found = anomalies([A0, T1, T2], INTERLEAVED, ww_deps=True)
    assert list(found) == ["G0"], found
    assert not anomalies([A0, T1, T2], INTERLEAVED, ww_deps=False)


def test_each_reading_the_others_value_is_G1c() -> None:
    t1 = Txn(1, "p1", "ok", appends=((0, "c", 1),), reads=((1, 1, "d"),))
    t2 = Txn(2, "p2", "ok", appends=((1, "d", 1),), reads=((0, 1, "c"),))
    found = anomalies([A0, t1, t2], final([(0, "a"), (1, "c")], [(0, "b"), (1, "d")]))
    assert list(found) == ["G1c"], found


def test_a_cycle_with_one_anti_dependency_is_G_single() -> None:
    # T1 reads key 0 before T2's append, and key 1 after it.
    t1 = Txn(1, "p1", "ok", reads=((0, 0, "a"), (1, 1, "d")))
    t2 = Txn(2, "p2", "ok", appends=((0, "c", 1), (1, "d", 1)))
    found = anomalies([A0, t1, t2], final([(0, "a"), (1, "c")], [(0, "b"), (1, "d")]))
    assert list(found) == ["G-single"], found


def test_write_skew_is_G2() -> None:
    t1 = Txn(1, "p1", "ok", appends=((1, "d", 1),), reads=((0, 0, "a"),))
    t2 = Txn(2, "p2", "ok", appends=((0, "c", 1),), reads=((1, 0, "b"),))
    found = anomalies([A0, t1, t2], final([(0, "a"), (1, "c")], [(0, "b"), (1, "d")]))
    assert list(found) == ["G2"], found


def record(txns: list[Txn], log: elle.Log) -> History:
    """``txns`` as the list-append workload records them, and the final read."""
    history = History()
    for txn in txns:
        plan = [["append", k, v] for k, v, _ in txn.appends]
        op = history.invoke(txn.process, "txn", plan)
        done = [[*m, o] for m, (_, _, o) in zip(plan, txn.appends, strict=True)]
        done += [["poll", [list(r) for r in txn.reads]]] if txn.reads else []
        {"ok": history.ok, "info": history.info, "fail": history.fail}[txn.status](
            op, *(["error"] if txn.status != "ok" else []), value=done)
    history.event("final-read", "final-read", {k: [list(r) for r in rs] for k, rs in log.items()})
    return history


def test_kafka_allows_write_cycles_and_counts_them() -> None:
    verdict = check_list_append("list-append", record([A0, T1, T2], INTERLEAVED).ops())
    assert verdict.valid, verdict
    assert verdict.stats["allowed-with-ww-edges"] == {"G0": 1}


@pytest.mark.parametrize("reads", [((1, 1, "d"),), ((1, 1, "d"), (0, 0, "a"))])
def test_kafka_forbids_a_cycle_of_reads_and_aborted_reads(reads: tuple[Any, ...]) -> None:
    t1 = Txn(1, "p1", "ok", appends=((0, "c", 1),), reads=reads)
    t2 = Txn(2, "p2", "ok", appends=((1, "d", 1),), reads=((0, 1, "c"),))
    aborted = Txn(3, "p3", "fail", appends=((0, "x", 2),))
    log = final([(0, "a"), (1, "c"), (2, "x")], [(0, "b"), (1, "d")])
    verdict = check_list_append("list-append", record([A0, t1, t2, aborted], log).ops())
    assert set(verdict.anomalies) == {"G1c", "G1a"}, verdict.anomalies


def test_a_reader_skipping_a_committed_record_fails_the_list_append_check() -> None:
    history = record([A0, Txn(1, "p1", "ok", appends=((0, "c", 1),))],
                     final([(0, "a"), (1, "c")], [(0, "b")]))
    for records in ([[0, 0, "a"]], [[0, 2, "d"]]):
        history.ok(history.invoke("reader-0", "poll"), records)
    verdict = check_list_append("list-append", history.ops())
    assert "poll-skip" in verdict.anomalies, verdict.anomalies
