"""The clock coordinators time what they promise by (scheduled deliveries, share groups' locks,
retry back-offs and sessions): milliseconds since the epoch as the wall clock read them when
the process started, advanced by the monotonic clock since. Record timestamps stay the wall
clock's.

A step of the system's wall clock while a broker runs (an operator's ``date -s``, a VM
resumed, a misbehaving time daemon) must neither deliver records early nor hold them back.
Read straight from the wall clock, a step forward of five minutes made every scheduled record
due within those five minutes due at once, and the step back then held new records until the
clock came back to the time already delivered up to (records are never due before it: they keep
the delivery order); a share group's records released during the step were held back for its
length, as were the locks taken then. NTP's slewing changes both clocks alike, so they do not
drift apart; a step is taken into account when the broker next starts (so start brokers once
the clock is set, as systemd's time-sync.target orders). Times written to storage (a share
record's back-off) are read by the next owner's clock, which its own start set.

A cluster broker sets this clock from ZooKeeper's each time it registers (``follow``: the
creation time of its registration, stamped by the ZooKeeper leader's clock), before it takes
any partition: a broker started while its host's clock was stepped (a VM whose clock is
corrected after boot; seen in the fault runs as a broker restarted during a two-minute step
that delivered scheduled records up to two minutes early long after the step was undone)
times by the cluster's clock all the same, and every broker agrees with the others to a few
milliseconds, so a partition that moves keeps its timing."""

from __future__ import annotations

import time

_WALL_AT_START_NS = time.time_ns()
_MONOTONIC_AT_START_NS = time.monotonic_ns()


def steady_now_ms() -> int:
    return (_WALL_AT_START_NS + time.monotonic_ns() - _MONOTONIC_AT_START_NS) // 1_000_000


def follow(reference_ms: int, at_monotonic_ns: int) -> int:
    """From now on, the time is ``reference_ms`` (read from a trusted clock, ZooKeeper's) at
    ``at_monotonic_ns``, advanced by the monotonic clock; returns how far ahead of it this
    host's wall clock is (ms)."""
    global _WALL_AT_START_NS, _MONOTONIC_AT_START_NS
    _WALL_AT_START_NS, _MONOTONIC_AT_START_NS = reference_ms * 1_000_000, at_monotonic_ns
    return time.time_ns() // 1_000_000 - steady_now_ms()
