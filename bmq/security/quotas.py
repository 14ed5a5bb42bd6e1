"""Client quotas enforced as Kafka enforces them (KIP-13, KIP-124, KIP-219).

Which quota applies to a request of ``user`` with ``client_id`` is Kafka's precedence, the first
entity with a value for the key: (user, client), (user, default client), (user), (default user,
client), (default user, default client), (default user), (client), (default client). The usage
of that entity is measured over ``quota.window.num`` (11) samples of
``quota.window.size.seconds`` (1), over at least all but one of them; when a response makes
the rate exceed the quota, it carries ``throttle_time_ms`` = the time the rate needs to come
back to the quota, and the broker stops reading that connection for as long (channel muting),
so a throttled client slows down while others are not affected. With no quota configured a
request costs one dict lookup.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from bmq.metadata.quotas import (
    ABSENT,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    Entity,
    QuotaStore,
)
from bmq.protocol.messages import REQUEST_APIS

MAX_THROTTLE_MS = 30_000
_PRODUCE_KEY = REQUEST_APIS["ProduceRequest"][0]
_FETCH_KEY = REQUEST_APIS["FetchRequest"][0]


def precedence(user: str, client_id: str) -> list[Entity]:
    """The entities that may hold a user's and client's quota, most specific first."""
    return [(user, client_id), (user, None), (user, ABSENT), (None, client_id), (None, None),
            (None, ABSENT), (ABSENT, client_id), (ABSENT, None)]


class _Rate:
    """Usage per second over the last ``samples`` samples of ``sample_s`` seconds, as Kafka's
    Rate measures it: over at least ``samples - 1`` whole samples, so a new client's first
    requests are spread over the whole window rather than judged alone."""

    __slots__ = ("sample_s", "samples", "window")

    def __init__(self, samples: int, sample_s: float) -> None:
        self.sample_s = sample_s
        self.window = samples * sample_s
        self.samples: deque[list[float]] = deque()    # [sample start, amount]

    def record(self, amount: float, now: float) -> tuple[float, float]:
        """Add ``amount``; (the rate, the window it was measured over)."""
        samples = self.samples
        if not samples or now - samples[-1][0] >= self.sample_s:
            samples.append([now, 0.0])
        samples[-1][1] += amount
        while now - samples[0][0] >= self.window:
            samples.popleft()
        elapsed = max(now - samples[0][0], self.window - self.sample_s)
        return sum(s[1] for s in samples) / elapsed, elapsed


class QuotaManager:
    def __init__(self, store: QuotaStore, samples: int = 11, sample_s: float = 1.0) -> None:
        self.store = store
        self._samples, self._sample_s = samples, sample_s
        self._rates: dict[tuple[str, Entity], _Rate] = {}
        # Which quota applies to whom, resolved for one version of the quotas (usage is kept
        # across versions): a new version, made here or reported by a watch, resolves again.
        self._resolved: tuple[int, dict[tuple[str, str, str], tuple[Entity, float] | None]] = (
            -3, {})

    def quota(self, key: str, user: str, client_id: str) -> tuple[Entity, float] | None:
        """(entity, value) of the quota that applies, or None."""
        version, quotas = self.store.state
        resolved_version, resolved = self._resolved
        if resolved_version != version:
            resolved = {}
            self._resolved = (version, resolved)
        cache_key = (key, user, client_id)
        if cache_key not in resolved:
            found = None
            for entity in precedence(user, client_id):
                value = quotas.get(entity, {}).get(key)
                if value is not None:
                    found = (entity, value)
                    break
            resolved[cache_key] = found
        return resolved[cache_key]

    def record(self, key: str, user: str, client_id: str, amount: float,
               now: float | None = None) -> int:
        """Add ``amount`` to the usage; the throttle time (ms) the response carries."""
        if not self.store.quotas:
            return 0
        applied = self.quota(key, user, client_id)
        return 0 if applied is None else self._charge(key, applied, amount, now)

    def _charge(self, key: str, applied: tuple[Entity, float], amount: float,
                now: float | None = None) -> int:
        """Add ``amount`` to the usage of the entity whose quota ``applied`` is."""
        entity, bound = applied
        now = time.monotonic() if now is None else now
        rate = self._rates.get((key, entity))
        if rate is None:
            rate = self._rates[(key, entity)] = _Rate(self._samples, self._sample_s)
        value, window = rate.record(amount, now)
        if value <= bound:
            return 0
        # Kafka's throttle time: how long until the rate over the window is back at the bound.
        return min(MAX_THROTTLE_MS, int((value - bound) / bound * window * 1000))

    def throttle(self, api_key: int, user: str, client_id: str, request: Any, response: Any,
                 seconds: float) -> int:
        """The throttle time of one answered request: produced or fetched bytes against the
        byte rates, handling time against request_percentage (in % of one thread). The bytes
        are counted only when a byte rate applies to the client: a produce or fetch of many
        partitions would otherwise cost every client without such a quota a walk over them."""
        if not self.store.quotas:
            return 0
        throttle = self.record(REQUEST_PERCENTAGE, user, client_id, seconds * 100)
        if api_key == _PRODUCE_KEY:
            applied = self.quota(PRODUCER_BYTE_RATE, user, client_id)
            if applied is not None:
                produced = sum(len(p.records) for t in request.topic_data
                               for p in t.partition_data if p.records is not None)
                throttle = max(throttle, self._charge(PRODUCER_BYTE_RATE, applied, produced))
        elif api_key == _FETCH_KEY and response is not None:
            applied = self.quota(CONSUMER_BYTE_RATE, user, client_id)
            if applied is not None:
                fetched = sum(len(p.records) for t in response.responses for p in t.partitions
                              if p.records is not None)
                throttle = max(throttle, self._charge(CONSUMER_BYTE_RATE, applied, fetched))
        return throttle
