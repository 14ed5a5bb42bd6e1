"""The ack lease: a broker acknowledges writes only while its ZooKeeper session surely lives.

ZooKeeper expires a session no sooner than ``session_timeout`` after it last heard from the
client. A request the server answered was heard at or after the moment it was sent, so if a
request sent at ``t`` (monotonic clock) was answered, the session cannot expire before
``t + session_timeout``. Until it expires nobody else is given this broker's partitions. The
lease is therefore ``t + session_timeout - margin`` for the latest answered request: a broker that
was frozen (SIGSTOP, a long GC-like pause, a partition from ZooKeeper) finds its lease run out
when it resumes and answers NOT_LEADER_OR_FOLLOWER instead of acknowledging anything.
"""

from __future__ import annotations

import logging
import threading
import time

from kazoo.client import KazooClient

log = logging.getLogger(__name__)


class Lease:
    def __init__(self, session_timeout_ms: int, margin_ms: int) -> None:
        self.duration_s = max(0.1, (session_timeout_ms - margin_ms) / 1000)
        self._confirmed = -1e18   # monotonic time of the last request ZooKeeper answered
        self._session_id: object = None

    def confirm(self, sent_at: float, session_id: object) -> None:
        if self._session_id is not None and session_id != self._session_id:
            # A new session: the old one's rights are gone, whatever this one says.
            return
        if sent_at > self._confirmed:
            self._confirmed = sent_at

    def bind(self, session_id: object, sent_at: float) -> None:
        """Start a lease for a (new) session, as of a request sent at ``sent_at``."""
        self._session_id = session_id
        self._confirmed = sent_at

    def revoke(self) -> None:
        self._confirmed = -1e18

    def valid(self) -> bool:
        return time.monotonic() < self._confirmed + self.duration_s


class LeaseKeeper:
    """A thread that keeps confirming contact with ZooKeeper several times per lease."""

    def __init__(self, zk: KazooClient, lease: Lease, probe_path: str, period_s: float) -> None:
        self._zk = zk
        self._lease = lease
        self._path = probe_path
        self._period = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bmq-lease", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            sent = time.monotonic()
            session = self._zk.client_id
            try:
                self._zk.exists(self._path)
                if session is not None and session == self._zk.client_id:
                    self._lease.confirm(sent, session)
            except Exception as error:  # connection loss, session expiry: just no renewal
                log.debug("lease probe failed: %s", error)
            self._stop.wait(self._period)
