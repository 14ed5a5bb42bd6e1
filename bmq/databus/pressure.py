"""Back-pressure: while the agent is behind, its Kafka port reads no new request, so its
clients see latency instead of timeouts.

Why: a request the agent has read is placed in a batch at once and its answer waits for the
batch (the linger, the spool, the cluster). An agent that reads faster than it forwards (its
one event loop out of CPU, or a cluster slower than the clients) answered later and later,
past librdkafka's 30 s request timeout; a client that is not idempotent then sent the request
again and the agent placed it twice (11,792 of 150,000 messages at 100 clients x 100
messages/s, p50 35 s). A Kafka broker bounds the same thing: it reads a connection's next
request only once the last is answered, and queues at most ``queued.max.requests`` read and not
yet handled. What the agent does not read waits in the client's connection: never taken, so a
client that gives up on it and sends it again gets it written once.

The agent reads at most ``MAX_REQUESTS`` requests ahead of its answers, over all its
connections (each connection at most ``kafka_port.MAX_INFLIGHT``; no bound over all while the
cluster cannot be reached), and none while it is behind.
The agent is behind when (checked every ``CHECK_S``)

* its event loop is late: a timer ran more than ``LAG_S`` after its time (the loop has more
  work queued than it does in that time: reading more adds to it), or
* the cluster takes batches (it answers) but a spooled batch has waited more than
  ``WAITING_S`` for its turn to be sent (the cluster is slower than the clients). While the
  cluster cannot be reached, the agent keeps taking messages into its spool, up to its bound,
  as it should.

The port's request memory (``bmq.net.memory``, which every connection asks before it reads a
frame) then refuses new frames; they are read once the agent has caught up. A connection with
nothing in progress anywhere in the agent is always read (so nothing waits for good)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from bmq.net.memory import RequestMemory

log = logging.getLogger(__name__)

CHECK_S = 0.05
LAG_S = 0.1
WAITING_S = 1.0
# Requests read and not yet answered, agent-wide (Kafka's queued.max.requests is 500, but a
# broker answers acks=1 in a millisecond; the agent's answers wait for a linger, 50 ms): the
# answers of a batch leave in one pass of the event loop, so this bounds that pass (about
# 0.3 s at the 3,000 requests/s one agent serves on a 2-core machine) while still letting
# 1,000 / (50 ms + the cluster's answer) requests/s through, more than the loop can serve.
MAX_REQUESTS = 1000
# The bound while the cluster cannot be reached (each connection is still bounded by
# kafka_port.MAX_INFLIGHT; the spool by its bytes).
OUTAGE_MAX_REQUESTS = 1 << 30


class AdmissionMemory(RequestMemory):
    """The Kafka port's request memory: ``limit`` bytes and ``max_requests`` requests read
    and not yet answered, agent-wide; nothing new is admitted while ``held``."""

    def __init__(self, limit: int, max_requests: int) -> None:
        super().__init__(limit)
        self.max_requests = max_requests
        self.requests = 0
        self.held = False

    def _full(self) -> bool:
        return self.held or self.requests >= self.max_requests

    def take(self, size: int) -> bool:
        if self.used > 0 and self._full():
            return False
        if not super().take(size):
            return False
        self.requests += 1
        return True

    def give_back(self, size: int) -> None:
        self.requests -= 1
        self.used -= size
        self._wake()

    def hold(self) -> None:
        self.held = True

    def bound(self, max_requests: int) -> None:
        self.max_requests = max_requests
        self._wake()

    def release(self) -> None:
        self.held = False
        self._wake()

    def _wake(self) -> None:
        """Wake the connections that waited, oldest first, while there is room: each reads
        its next frame (taking room) or waits again at the end of the line. Not all of them
        at each answer: with a hundred waiting, that was a hundred callbacks an answer."""
        for _ in range(len(self._waiting)):
            if self._full() or 0 <= self.limit <= self.used:
                return
            self._waiting.popleft()()


class Pressure:
    """Holds ``memory`` while the agent is behind (see the module's text)."""

    def __init__(self, memory: AdmissionMemory, oldest_waiting_s: Callable[[], float],
                 cluster_failing: Callable[[], bool]) -> None:
        """``oldest_waiting_s``: how long the oldest batch not yet sent has waited while the
        cluster answers (0 if none waits, or the cluster cannot be reached);
        ``cluster_failing``: whether the cluster cannot be reached now."""
        self.memory = memory
        self._oldest_waiting_s = oldest_waiting_s
        self._cluster_failing = cluster_failing
        self._timer: asyncio.TimerHandle | None = None
        self._due = 0.0
        self.held_since = 0.0
        self.held_seconds = 0.0         # in all (for the status)
        self.holds = 0

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._due = loop.time() + CHECK_S
        self._timer = loop.call_at(self._due, self._check)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.memory.held:
            self.memory.release()

    def _check(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        lag = now - self._due
        waiting = self._oldest_waiting_s()
        behind = lag > LAG_S or waiting > WAITING_S
        if behind and not self.memory.held:
            self.memory.hold()
            self.held_since = now
            self.holds += 1
            log.debug("behind (loop %.0f ms late, a batch waiting %.1f s): reading held",
                      lag * 1000, waiting)
        elif not behind and self.memory.held:
            self.held_seconds += now - self.held_since
            self.memory.release()
        # While the cluster cannot be reached, requests waiting for it (acks=all) are spooled
        # and cost the loop nothing more until it answers: counted, a thousand of them would
        # stop every other client (acks=1 ones, which the spool answers) until they timed out.
        bound = OUTAGE_MAX_REQUESTS if self._cluster_failing() else MAX_REQUESTS
        if bound != self.memory.max_requests:
            self.memory.bound(bound)
        self._due = now + CHECK_S
        self._timer = loop.call_at(self._due, self._check)
