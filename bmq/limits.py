"""The process's limit of open files, met at start-up: a server role raises its soft limit to
the hard limit (Kafka leaves that to the operator, as systemd's ``LimitNOFILE`` does) before it
opens anything, and says what it has once it serves (``report``, logged by ``bmq.lifecycle``:
a role that cannot start says only why, in one line). The role sizes the pool of partitions'
file handles from it (``bmq.storage.handles``)."""

from __future__ import annotations

import resource
from pathlib import Path

_NR_OPEN = Path("/proc/sys/fs/nr_open")     # the kernel's ceiling for an unlimited hard limit
_report = ""


def _ceiling(hard: int) -> int:
    if hard != resource.RLIM_INFINITY:
        return hard
    try:
        return int(_NR_OPEN.read_text())
    except (OSError, ValueError):
        return 1 << 20


def _shown(limit: int) -> str:
    return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)


def raise_open_files_limit() -> int:
    """Raise the soft limit of open files to the hard limit; returns the soft limit the process
    runs with."""
    global _report
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _ceiling(hard)
    if soft == resource.RLIM_INFINITY or soft >= target:
        running = target if soft == resource.RLIM_INFINITY else soft
        _report = (f"open files: soft limit {_shown(soft)}, hard limit {_shown(hard)}; "
                   f"partitions keep at most {partition_files(running)} open")
        return running
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError) as error:
        _report = (f"open files: soft limit {soft}, hard limit {_shown(hard)} (could not "
                   f"raise the soft limit: {error}); partitions keep at most "
                   f"{partition_files(soft)} open")
        return soft
    _report = (f"open files: soft limit raised from {soft} to {target} (hard limit "
               f"{_shown(hard)}); partitions keep at most {partition_files(target)} open")
    return target


def partition_files(open_files: int) -> int:
    """How many files partitions may keep open under a limit of ``open_files``: half (the rest
    is for client connections, links and the files opened for a moment)."""
    return max(64, open_files // 2)


def report() -> str:
    """What ``raise_open_files_limit`` found and did ("" if it did not run)."""
    return _report
