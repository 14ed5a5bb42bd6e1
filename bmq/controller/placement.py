"""Where partitions go: evenly over the live brokers, moving as few as possible.

Per topic, every live broker gets ``floor(P/n)`` or ``ceil(P/n)`` of its ``P`` partitions. A
partition stays where it is while its broker is live and within that share; the others (new, on
a dead or draining broker, or over a broker's share) go first to the broker ``i mod n`` would name
(the starting point on an empty cluster) if it has room, else to the live broker with room that
holds the fewest partitions over all topics (so coordinators and small topics spread too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def place(num_partitions: int, current: Mapping[int, int | None], live: Sequence[int],
          load: dict[int, int], offset: int = 0) -> dict[int, int | None]:
    """The owner of each partition ``0..num_partitions-1``; ``load`` (partitions per broker over
    all topics placed so far) is updated. ``offset`` rotates the starting broker per topic."""
    if not live:
        return dict.fromkeys(range(num_partitions))
    brokers = sorted(live)
    n = len(brokers)
    base, extra = divmod(num_partitions, n)
    count = dict.fromkeys(brokers, 0)
    result: dict[int, int | None] = {}
    # Keep current owners up to the base share, then let `extra` of them keep one more.
    for p in range(num_partitions):
        owner = current.get(p)
        if owner in count and count[owner] < base:
            result[p] = owner
            count[owner] += 1
    plus = extra
    for p in range(num_partitions):
        owner = current.get(p)
        if p not in result and owner in count and count[owner] == base and plus > 0:
            result[p] = owner
            count[owner] += 1
            plus -= 1
    for p in range(num_partitions):
        if p in result:
            continue
        preferred = brokers[(p + offset) % n]
        room = [b for b in brokers if count[b] < base]
        if not room and plus > 0:
            room = [b for b in brokers if count[b] == base]
            plus -= 1
        if not room:  # cannot happen: shares add up to num_partitions
            room = brokers
        chosen = preferred if preferred in room else min(
            room, key=lambda b: (load.get(b, 0), count[b], b))
        result[p] = chosen
        count[chosen] += 1
    for owner in result.values():
        if owner is not None:
            load[owner] = load.get(owner, 0) + 1
    return result
