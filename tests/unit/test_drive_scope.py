"""A cluster broker drives, after a read of the cluster, only the partitions of topics whose
assignment document changed (bmq.broker.membership.drive_scope), all of them after a new
registration and every FULL_SCAN_S."""

from __future__ import annotations

import time

import pytest

from bmq.broker.membership import drive_scope
from bmq.broker.membership.drive_scope import DriveScope


def test_only_changed_and_removed_topics_then_all_after_a_new_registration(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    scope = DriveScope()
    a, b, c = {"0": {}}, {"0": {}}, {"0": {}}
    assert scope.topics({"a": a, "b": b}, reg=7) is None        # the first read: all
    assert scope.topics({"a": a, "b": b}, reg=7) == set()       # nothing changed
    assert scope.topics({"a": {"0": {}}, "b": b, "c": c}, reg=7) == {"a", "c"}
    assert scope.topics({"c": c}, reg=7) == {"a", "b"}          # deleted topics too
    assert scope.topics({"c": c}, reg=8) is None                # registered again: all
    clock[0] += drive_scope.FULL_SCAN_S
    assert scope.topics({"c": c}, reg=8) is None                # and every FULL_SCAN_S
    assert scope.topics({"c": c}, reg=8) == set()
