"""The partitions Metadata describes for each topic (leaders, epochs, replicas), kept while
nothing they depend on changed.

Why: at 100,000 partitions a full Metadata response worked every partition's leader out and
built its description anew, 0.5-1 s of the broker's event loop each time, and librdkafka
producing to 1,000 topics asks again and again (the 100,000-partition cluster's produce run
starved its brokers). A topic's descriptions are now rebuilt only when its ``TopicInfo`` was
replaced, its partition count changed (registries update a topic's ``TopicInfo`` in place) or its
leadership token did (``Membership.leaders_token``: what the leaders depend on besides the
partition).

The cached lists are shared by the responses that carry them: nobody may modify them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from bmq.metadata.topics import TopicInfo
from bmq.protocol.messages.metadata_response import MetadataResponsePartition

Partitions = list[MetadataResponsePartition]


class LeadersCache:
    def __init__(self) -> None:
        self._entries: dict[str, tuple[TopicInfo, int, object, Partitions]] = {}

    def partitions(self, info: TopicInfo, token: object,
                   build: Callable[[], Partitions]) -> Partitions:
        """``info``'s partition descriptions: cached, or ``build()`` when ``info``, its
        partition count or ``token`` is not the one they were built for."""
        entry = self._entries.get(info.name)
        if entry is not None and entry[0] is info and entry[1] == info.partitions \
                and entry[2] == token:
            return entry[3]
        built = build()
        self._entries[info.name] = (info, info.partitions, token, built)
        return built

    def keep_only(self, names: Collection[str]) -> None:
        """Forget the topics not in ``names`` (deleted ones)."""
        if len(self._entries) > len(names):
            self._entries = {n: e for n, e in self._entries.items() if n in names}
