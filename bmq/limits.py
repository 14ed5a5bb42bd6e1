"""The process's limit of open files, met at start-up: a server role raises its soft limit to
the hard limit (Kafka leaves that to the operator, as systemd's ``LimitNOFILE`` does) and says
what it has, and sizes the pool of partitions' file handles (``bmq.storage.handles``) to half
of it; the other half is for client connections, links and the files opened for a moment. So the
limit bounds the files partitions keep open at once, not the number of partitions."""

from __future__ import annotations

import logging
import resource
from pathlib import Path

from bmq.storage.handles import OPEN_FILES

log = logging.getLogger(__name__)

_NR_OPEN = Path("/proc/sys/fs/nr_open")     # the kernel's ceiling for an unlimited hard limit


def _ceiling(hard: int) -> int:
    if hard != resource.RLIM_INFINITY:
        return hard
    try:
        return int(_NR_OPEN.read_text())
    except (OSError, ValueError):
        return 1 << 20


def meet_open_files_limit() -> None:
    """Raise the soft limit of open files to the hard limit (logged) and size the partitions'
    pool of handles to half of what the process runs with."""
    OPEN_FILES.limit = max(64, _raise_soft_limit() // 2)
    log.info("partitions keep at most %d files open", OPEN_FILES.limit)


def _raise_soft_limit() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _ceiling(hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError) as error:
            log.warning("open files: soft limit %d, hard limit %s; could not raise the soft "
                        "limit: %s", soft, _shown(hard), error)
            return soft
        log.info("open files: soft limit raised from %d to %d (hard limit %s)", soft, target,
                 _shown(hard))
        return target
    log.info("open files: soft limit %s, hard limit %s", _shown(soft), _shown(hard))
    return soft if soft != resource.RLIM_INFINITY else target


def _shown(limit: int) -> str:
    return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)
