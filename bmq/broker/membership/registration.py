"""A cluster broker's registration in ZooKeeper: the ephemeral node that says it is alive (its
creation zxid names this incarnation in every assignment), which also sets the clock the broker
times scheduled deliveries and share groups by (``bmq.coordinators.clock``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from bmq.broker.membership.lease import Lease
from bmq.coordinators import clock

log = logging.getLogger("bmq.broker.membership.cluster")

CLOCK_OFF_WARN_MS = 1000    # a host clock this far off ZooKeeper's is worth an operator's look


def register(zk: KazooClient, path: str, node_id: int, document: Callable[[], bytes],
             lease: Lease, session_timeout_ms: int) -> int:
    """Blocking: create the registration at ``path`` (waiting out a previous incarnation's
    session), bind the ack lease to the session, follow ZooKeeper's clock; returns the
    registration's creation zxid."""
    deadline = time.monotonic() + 3 * session_timeout_ms / 1000 + 30
    while True:
        sent = time.monotonic()
        session = zk.client_id
        try:
            _, created = zk.create(path, document(), ephemeral=True, makepath=True,
                                   include_data=True)
            # ZooKeeper stamped ctime between our request and its answer: read as stamped
            # now, our clock is behind by at most the round trip, never ahead (the midpoint
            # put it ahead when the request waited to be sent, and scheduled records went
            # out early).
            _follow_clock(created.ctime, time.monotonic_ns())
        except NodeExistsError:
            stat = zk.exists(path)
            if stat is None:
                continue
            if session is None or stat.ephemeralOwner != session[0]:
                # A previous incarnation's session has not expired yet.
                if time.monotonic() > deadline:
                    raise RuntimeError(f"broker id {node_id} is taken by a live broker"
                                       ) from None
                time.sleep(0.2)
                continue
        stat = zk.exists(path)
        if stat is None:
            continue
        lease.bind(session, sent)
        log.info("registered as broker %d (registration %d)", node_id, stat.czxid)
        return int(stat.czxid)


def _follow_clock(zookeeper_ms: int, at_monotonic_ns: int) -> None:
    """Time scheduled deliveries and share groups by ZooKeeper's clock (see
    ``bmq.coordinators.clock``): ``zookeeper_ms`` stamped our registration."""
    ahead_ms = clock.follow(zookeeper_ms, at_monotonic_ns)
    if abs(ahead_ms) >= CLOCK_OFF_WARN_MS:
        log.warning("this host's wall clock is %+.1f s off ZooKeeper's: scheduled delivery "
                    "and share groups are timed by ZooKeeper's", ahead_ms / 1000)
