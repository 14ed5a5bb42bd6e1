"""Whether a broker a request waits on is alive: requests sent on a link are watched, and given
up on when the broker is *stalled* rather than only slow.

A broker answers a connection's requests in order, so a client connection whose requests are
forwarded (a proxy's) gets nothing more once one of them waits on a broker that is frozen
(SIGSTOP) or cut off: the request must be given up on, and answered otherwise, long before the
client's own request timeout. Slow is not dead, though: a storage flush under load takes
seconds, and a forward given up on while its broker completes it is one the client retries.

So while requests are outstanding on a link, its broker is asked for its ApiVersions on a
connection of its own every ``PROBE_S``. A link that has had a request outstanding for
``STALL_S`` with no answer meanwhile, neither there nor to a probe, is stalled
(``ask_while_alive`` raises ``Stalled``), and so is every request for it until it answers again;
one stalled for ``GIVE_UP_S`` is closed (an answer lost for good, as after a Kafka client's
request timeout).

Silence is counted only while this process runs (``_RunningClock``). On a machine short of CPU
a proxy can go half a second without running; when it runs again its timers fire before it reads
the answers waiting in its sockets, so brokers that answered meanwhile looked stalled: on the
fault tests' 2-core hosts, the partitions of healthy brokers were answered REQUEST_TIMED_OUT
while the cluster moved a frozen broker's partitions, and paused for 2-3 s."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from bmq.net.client import BrokerLink, LinkError
from bmq.protocol.messages import ApiVersionsRequest

STALL_S = 0.5           # a broker silent this long with a request outstanding is stalled
PROBE_S = 0.2           # how often a broker with a request outstanding is probed
GIVE_UP_S = 30.0        # ... and its link closed if it stays stalled this long
GIVE_UP_PROBE_S = 2.0   # a probe's connection unanswered this long is replaced
TICK_S = 0.05           # how often the process checks that it runs on time
LATE_S = 0.05           # ... and a tick later than this is time it did not run
# A silent broker's probes pile up no further than those of one GIVE_UP_PROBE_S.
PROBES_IN_FLIGHT = round(GIVE_UP_PROBE_S / PROBE_S)

T = TypeVar("T")


class Stalled(Exception):
    """The link is stalled: the request (if one was sent) stays outstanding there."""


class _RunningClock:
    """The event loop's time less the time the process did not run (its ticks came late):
    a broker's silence counts on this clock only. ``now()`` counts a tick that is overdue at
    once, so a check made before the tick has run (timers fire in any order) sees it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._tick = loop.time()
        self._missed = 0.0
        self._ticking = loop.create_task(self._run())

    def _overdue(self, now: float) -> float:
        return max(0.0, now - self._tick - TICK_S - LATE_S)

    def now(self) -> float:
        now = self._loop.time()
        return now - self._missed - self._overdue(now)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            now = self._loop.time()
            self._missed += self._overdue(now)
            self._tick = now


_clocks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _RunningClock] = \
    weakref.WeakKeyDictionary()


def running_time() -> float:
    """Seconds this process has run on the current event loop's clock (see ``_RunningClock``)."""
    loop = asyncio.get_running_loop()
    clock = _clocks.get(loop)
    if clock is None:
        clock = _clocks[loop] = _RunningClock(loop)
    return clock.now()


class _Probe:
    """Asks one broker address for its ApiVersions on a connection of its own (a broker answers
    a connection's requests in order: behind a slow request on the watched link, a probe would
    prove nothing), at most every ``PROBE_S``. Probes are pipelined, so a broker behind a slow
    link (500 ms each way) still answers one every ``PROBE_S``: "silent" means no answer, not a
    slow one."""

    def __init__(self, link: BrokerLink) -> None:
        self.link = link
        self.alive_at = float("-inf")   # when the broker last answered a probe
        self._sent_at = float("-inf")
        self._asking: set[asyncio.Task[None]] = set()

    def ask(self) -> None:
        now = running_time()
        if now - self._sent_at < PROBE_S or len(self._asking) >= PROBES_IN_FLIGHT:
            return
        self._sent_at = now
        task = asyncio.get_running_loop().create_task(self._ask(self.link))
        self._asking.add(task)
        task.add_done_callback(self._asking.discard)

    async def _ask(self, link: BrokerLink) -> None:
        try:
            await asyncio.wait_for(link.request(ApiVersionsRequest(), 0), GIVE_UP_PROBE_S)
        except TimeoutError:
            # Its packets may be lost in a partition that has healed since, and TCP's
            # retransmissions back off to minutes: the next probe opens a new connection.
            link.close()
            if link is self.link:
                self.link = link.sibling()
            return
        except (LinkError, OSError):
            if link is self.link and link.closed:
                self.link = link.sibling()
            return
        self.alive_at = running_time()


# Per event loop, per broker address.
_probes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, int], _Probe]] = \
    weakref.WeakKeyDictionary()


def _probe(link: BrokerLink) -> _Probe:
    probes = _probes.setdefault(asyncio.get_running_loop(), {})
    probe = probes.get((link.host, link.port))
    if probe is None:
        probe = probes[(link.host, link.port)] = _Probe(link.sibling())
    return probe


@dataclass
class _Watch:
    """What one link has answered: stalled when a request has been outstanding for ``STALL_S``
    with no answer meanwhile, on the link or to a probe of its broker."""

    probe: _Probe
    outstanding: int = 0
    since: float = 0.0          # the last answer, or the first request after none outstanding

    def stalled(self, now: float) -> bool:
        return self.outstanding > 0 and now - max(self.since, self.probe.alive_at) > STALL_S

    def close_if_given_up(self, link: BrokerLink, now: float) -> None:
        """Close ``link`` once it has been stalled for ``GIVE_UP_S`` (its answers are lost)."""
        if self.stalled(now) and now - self.since > GIVE_UP_S:
            link.close()

    def answered(self, request: asyncio.Future[Any]) -> None:
        self.outstanding -= 1
        self.since = running_time()
        if not request.cancelled():
            request.exception()     # retrieved: its caller may have given up on it already


_watches: weakref.WeakKeyDictionary[BrokerLink, _Watch] = weakref.WeakKeyDictionary()


class Outstanding(Generic[T]):
    """A request sent on a link, watched: ``request`` is its answer; ``stalled()`` says whether
    the link's broker has gone silent since (and probes it meanwhile)."""

    def __init__(self, link: BrokerLink, send: Callable[[], Awaitable[T]]) -> None:
        watch = _watches.get(link)
        if watch is None:
            watch = _watches[link] = _Watch(_probe(link))
        self._watch = watch
        self.started = running_time()
        watch.close_if_given_up(link, self.started)
        if not watch.outstanding:
            watch.since = self.started
        watch.outstanding += 1
        self.request: asyncio.Future[T] = asyncio.ensure_future(send())
        self.request.add_done_callback(watch.answered)

    def stalled(self) -> bool:
        self._watch.probe.ask()
        return self._watch.stalled(running_time())


async def ask_while_alive(link: BrokerLink, send: Callable[[], Awaitable[T]],
                          slow_s: float | None = None) -> T:
    """The answer of the request ``send`` makes on ``link``, waited for while the link's broker
    is alive (and for ``slow_s`` at most, if given); ``Stalled`` if the link is stalled, before
    or while it waits (the request then stays outstanding: its answer, when it comes, only
    tells the link is alive). LinkError if the link fails."""
    watch = _watches.get(link)
    now = running_time()
    if watch is not None and watch.stalled(now):
        watch.probe.ask()
        watch.close_if_given_up(link, now)
        raise Stalled
    asked = Outstanding(link, send)
    while not asked.request.done():
        if asked.stalled() or (slow_s is not None and running_time() - asked.started > slow_s):
            raise Stalled
        await asyncio.wait({asked.request}, timeout=PROBE_S)
    return asked.request.result()
