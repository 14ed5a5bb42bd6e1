"""The server-side assignors of KIP-848 consumer groups: ``uniform`` (the default) and ``range``.

An assignor maps the group's members (their subscribed topics, by topic id) and the
subscribed topics' partition counts to a target assignment. It runs on the coordinator whenever
the group epoch moves on; the members then converge to the target by themselves (see
``consumer_group.py``), so an assignor only decides where partitions should end up.

* ``uniform`` spreads every subscribed partition over the members that subscribe to its topic
  as evenly as possible (counts differ by at most one among members with the same
  subscriptions) and keeps partitions where the previous target put them whenever that does not
  break the balance, so a rebalance moves as few partitions as it can.
* ``range`` gives each member consecutive ranges of every topic it subscribes to, topic by topic,
  members in member-id order, as the classic range assignor does (members subscribed to the
  same topics get the same partition numbers of co-partitioned topics).

Neither looks at racks.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

# Topic id -> partitions; what a member owns, is given, or should get.
Assignment = dict[uuid.UUID, set[int]]
Partition = tuple[uuid.UUID, int]

Assignor = Callable[[Mapping[str, frozenset[uuid.UUID]], Mapping[uuid.UUID, int],
                     Mapping[str, Assignment]], dict[str, Assignment]]


def _to_assignment(partitions: list[Partition]) -> Assignment:
    out: Assignment = {}
    for topic_id, index in partitions:
        out.setdefault(topic_id, set()).add(index)
    return out


def uniform(members: Mapping[str, frozenset[uuid.UUID]], topics: Mapping[uuid.UUID, int],
            previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Balanced and sticky: see the module's docstring."""
    if not members:
        return {}
    order = sorted(members)
    owned: dict[str, list[Partition]] = {m: [] for m in order}
    taken: set[Partition] = set()
    # Stickiness: keep what the previous target gave a member if it still exists and is still
    # subscribed (a partition is in at most one member's previous target).
    for member in order:
        for topic_id, partitions in sorted(previous.get(member, {}).items()):
            if topic_id in members[member] and topic_id in topics:
                for index in sorted(partitions):
                    if index < topics[topic_id] and (topic_id, index) not in taken:
                        owned[member].append((topic_id, index))
                        taken.add((topic_id, index))
    subscribed = sorted({t for topic_ids in members.values() for t in topic_ids if t in topics})
    free = [(t, i) for t in subscribed for i in range(topics[t]) if (t, i) not in taken]
    if len(set(members.values())) == 1:
        _balance_homogeneous(order, owned, free)
    else:
        _balance_general(members, order, owned, free)
    return {m: _to_assignment(owned[m]) for m in order}


def _balance_homogeneous(order: list[str], owned: dict[str, list[Partition]],
                         free: list[Partition]) -> None:
    """Every member may take every partition: quotas are floor or ceil of the average."""
    total = len(free) + sum(len(p) for p in owned.values())
    base, extra = divmod(total, len(order))
    # The members keeping most of what they had get the extra partitions: fewer moves.
    by_kept = sorted(order, key=lambda m: (-len(owned[m]), m))
    quota = {m: base + (1 if rank < extra else 0) for rank, m in enumerate(by_kept)}
    for member in order:
        while len(owned[member]) > quota[member]:
            free.append(owned[member].pop())
    free.sort()
    for member in order:
        while len(owned[member]) < quota[member]:
            owned[member].append(free.pop(0))


def _balance_general(members: Mapping[str, frozenset[uuid.UUID]], order: list[str],
                     owned: dict[str, list[Partition]], free: list[Partition]) -> None:
    """Members subscribe to different topics: give each free partition to the least loaded
    member that subscribes to its topic, then move partitions from loaded members to eligible
    members with at least two fewer until no such move is left."""
    for topic_id, index in free:
        eligible = [m for m in order if topic_id in members[m]]
        target = min(eligible, key=lambda m: (len(owned[m]), order.index(m)))
        owned[target].append((topic_id, index))
    moved = True
    while moved:
        moved = False
        for donor in sorted(order, key=lambda m: -len(owned[m])):
            for partition in reversed(owned[donor]):
                eligible = [m for m in order if partition[0] in members[m]
                            and len(owned[m]) + 1 < len(owned[donor])]
                if eligible:
                    receiver = min(eligible, key=lambda m: (len(owned[m]), m))
                    owned[donor].remove(partition)
                    owned[receiver].append(partition)
                    moved = True
                    break
            if moved:
                break


def range_(members: Mapping[str, frozenset[uuid.UUID]], topics: Mapping[uuid.UUID, int],
           previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Consecutive ranges per topic: see the module's docstring."""
    out: dict[str, Assignment] = {m: {} for m in members}
    for topic_id in sorted({t for ts in members.values() for t in ts if t in topics}):
        subscribers = sorted(m for m in members if topic_id in members[m])
        base, extra = divmod(topics[topic_id], len(subscribers))
        start = 0
        for rank, member in enumerate(subscribers):
            count = base + (1 if rank < extra else 0)
            if count:
                out[member][topic_id] = set(range(start, start + count))
            start += count
    return out


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
