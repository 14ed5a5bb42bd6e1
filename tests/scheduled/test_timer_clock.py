"""The timers' clock (bmq/coordinators/clock.py) does not follow a step of the wall
clock: a broker whose clock jumped five minutes forward delivered every record due within them
at once (tests/faults/test_share_scheduled_loopback.py runs it under a stepped clock)."""

from __future__ import annotations

import time

import pytest

from bmq.coordinators.clock import steady_now_ms


def test_a_step_of_the_wall_clock_is_not_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    before = steady_now_ms()
    assert abs(before - time.time_ns() // 1_000_000) < 1000
    real = time.time_ns
    for step_s in (300, -300):
        monkeypatch.setattr(time, "time_ns", lambda step=step_s: real() + step * 10**9)
        assert 0 <= steady_now_ms() - before < 1000
    monkeypatch.undo()
    time.sleep(0.05)
    assert steady_now_ms() - before >= 50
