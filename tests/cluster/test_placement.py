"""Placement and the controller's state machine step, without ZooKeeper."""

from __future__ import annotations

from collections import Counter
from typing import Any

from bmq.controller.controller import describe_changes, next_assignments
from bmq.controller.placement import place
from bmq.metadata.zookeeper.layout import RELEASED
from bmq.metadata.zookeeper.reports import encode


def test_empty_cluster_starts_at_i_mod_n() -> None:
    assert place(6, {}, [1, 2, 3], {}) == {0: 1, 1: 2, 2: 3, 3: 1, 4: 2, 5: 3}


def test_even_spread_and_minimal_moves_on_join() -> None:
    current = place(8, {}, [1, 2, 3], {})
    joined = place(8, dict(current), [1, 2, 3, 4], {})
    assert sorted(Counter(joined.values()).values()) == [2, 2, 2, 2]
    assert sum(current[p] != joined[p] for p in range(8)) == 2


def test_leave_moves_only_the_orphans() -> None:
    current = place(9, {}, [1, 2, 3], {})
    left = place(9, {p: o for p, o in current.items() if o != 2}, [1, 3], {})
    assert all(left[p] == current[p] for p in current if current[p] != 2)
    assert sorted(Counter(left.values()).values()) == [4, 5]


def test_no_live_broker_leaves_partitions_unowned() -> None:
    assert place(3, {0: 1}, [], {}) == {0: None, 1: None, 2: None}


def _broker(reg: int, draining: bool = False, **reports: Any) -> tuple[int, dict[str, Any]]:
    return reg, {"draining": draining, "reports": encode({k.replace("__", "/"): v
                                                          for k, v in reports.items()})}


def test_state_machine_assign_drain_release_reassign() -> None:
    brokers = {1: _broker(11), 2: _broker(12)}
    first = next_assignments({"t": 2}, {}, brokers)["t"]
    assert first == {"0": {"owner": 1, "reg": 11, "epoch": 1, "draining": False},
                     "1": {"owner": 2, "reg": 12, "epoch": 1, "draining": False}}
    # Broker 2 drains: its partition is marked draining, not moved yet.
    brokers[2] = _broker(12, draining=True)
    step = next_assignments({"t": 2}, {"t": first}, brokers)["t"]
    assert step["1"] == {**first["1"], "draining": True}
    # Nothing happens until the owner reports the partition released for that epoch.
    assert next_assignments({"t": 2}, {"t": step}, brokers) == {}
    brokers[2] = _broker(12, draining=True, t__1=[1, RELEASED])
    done = next_assignments({"t": 2}, {"t": step}, brokers)["t"]
    assert done["1"] == {"owner": 1, "reg": 11, "epoch": 2, "draining": False}


def test_dead_owner_is_replaced_at_once_with_a_new_epoch() -> None:
    brokers = {1: _broker(11), 2: _broker(12)}
    docs = next_assignments({"t": 2}, {}, brokers)
    del brokers[2]
    after = next_assignments({"t": 2}, docs, brokers)["t"]
    assert after["1"] == {"owner": 1, "reg": 11, "epoch": 2, "draining": False}
    # A restarted broker is a new registration: the old assignment is not its own.
    brokers[2] = _broker(99)
    assert next_assignments({"t": 2}, {"t": {"0": docs["t"]["0"], "1": {
        "owner": 2, "reg": 12, "epoch": 1, "draining": False}}}, brokers)["t"]["1"]["epoch"] == 2


def test_deleted_topic_loses_its_assignments() -> None:
    brokers = {1: _broker(11)}
    docs = next_assignments({"t": 1}, {}, brokers)
    assert next_assignments({}, docs, brokers) == {"t": {}}


def test_fenced_report_moves_the_epoch_above_storage() -> None:
    brokers = {1: _broker(11)}
    docs = next_assignments({"t": 1}, {}, brokers)
    brokers[1] = _broker(11, t__0=[1, "fenced", 7])
    after = next_assignments({"t": 1}, docs, brokers)["t"]["0"]
    assert after == {"owner": 1, "reg": 11, "epoch": 8, "draining": False}


def test_the_log_line_of_a_pass_counts_moves_by_kind() -> None:
    brokers = {1: _broker(11), 2: _broker(12)}
    first = next_assignments({"t": 4}, {}, brokers)
    assert describe_changes({}, first) == "2 to broker 1, 2 to broker 2"
    brokers[2] = _broker(12, draining=True)
    step = next_assignments({"t": 4}, first, brokers)
    assert describe_changes(first, step) == "2 draining"
    brokers[2] = _broker(12, draining=True, t__1=[1, RELEASED], t__3=[1, RELEASED])
    assert describe_changes(step, next_assignments({"t": 4}, step, brokers)) == \
        "2 to broker 1"
    assert describe_changes(first, next_assignments({"t": 4}, first, {})) == "4 unowned"
