"""What a Kafka client knows of a cluster, from its Metadata API: the brokers (node id -> host
and port) and the topics (name <-> id, each partition's leader and leader epoch).

A ``MetadataCache`` starts from bootstrap addresses and asks the brokers it knows (then the
bootstrap ones) in turn on a ``LinkPool``. It looks again on demand (``refresh``), when its
answer is older than ``max_age_s`` (Kafka's ``metadata.max.age.ms``: the stale answer is served
meanwhile), and soon after it is told a leader it named did not take a partition's batch
(``moved``: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, unreachable; as librdkafka and
the Java client do), at most once per ``REFRESH_BACKOFF_S`` (answered or not). A partition's
leader is replaced only by one of the same or a newer leader epoch (a broker whose view lags
does not move it back), unless the topic was re-created (a new topic id).

It is the ``ProduceTargets`` of ``bmq.client.produce.route_produce`` for a client that sees the
cluster through Metadata (the proxy sees it through ZooKeeper instead)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from bmq.client.requests import Address
from bmq.listeners import split_host_port
from bmq.net.client import LinkError, LinkPool
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.messages import MetadataRequest, MetadataResponse
from bmq.protocol.messages.metadata_request import MetadataRequestTopic

# The newest version without KIP-1102's top-level error code; it has topic ids (v10+).
METADATA_VERSION = 12
MAX_AGE_S = 300.0               # Kafka's metadata.max.age.ms default
REFRESH_BACKOFF_S = 0.1         # librdkafka's topic.metadata.refresh.fast.interval.ms
NO_LEADER = -1


def bootstrap_addresses(bootstrap: str) -> list[Address]:
    """``host:port,...`` (each optionally ``PROTOCOL://host:port``, as librdkafka takes them)."""
    return [split_host_port(part.strip().rpartition("://")[2])
            for part in bootstrap.split(",") if part.strip()]


@dataclass(frozen=True)
class PartitionLeader:
    node_id: int            # NO_LEADER: none now
    epoch: int


@dataclass
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    error: ErrorCode = ErrorCode.NONE
    partitions: dict[int, PartitionLeader] = field(default_factory=dict)


class MetadataCache:
    def __init__(self, bootstrap: Sequence[Address], links: LinkPool,
                 topics: Sequence[str] | None = None, max_age_s: float = MAX_AGE_S,
                 request_timeout_s: float = 30.0) -> None:
        """``topics``: the topics to know (None: every topic; empty: the brokers only).
        ``request_timeout_s``: how long a refresh may take, all the brokers it asks together."""
        self.bootstrap = list(bootstrap)
        self.links = links
        self.wanted = None if topics is None else list(topics)
        self.max_age_s = max_age_s
        self.request_timeout_s = request_timeout_s
        self.brokers: dict[int, Address] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self._names: dict[uuid.UUID, str] = {}
        self._fetched_at: float | None = None     # loop time of the last answer
        self._asked_at: float | None = None       # and of the last question, answered or not
        self._refreshing: asyncio.Task[None] | None = None

    async def refresh(self) -> None:
        """Ask for the cluster's metadata now (joining a refresh already under way); LinkError
        if no broker answered."""
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.get_running_loop().create_task(self._fetch(0.0))
        await asyncio.shield(self._refreshing)

    async def fresh(self) -> MetadataCache:
        """The cache, refreshed first if it has no answer yet or one older than ``max_age_s``."""
        if self._expired():
            await self.refresh()
        return self

    def moved(self, topic: str, index: int) -> None:
        """The leader this cache named for the partition did not take its batch: look again
        soon (``owner`` serves the new leader once the answer is in)."""
        self._refresh_soon()

    def leader(self, topic: str, index: int) -> PartitionLeader | None:
        info = self.topics.get(topic)
        return None if info is None else info.partitions.get(index)

    # ProduceTargets (bmq.client.produce)
    def topic_name(self, topic_id: uuid.UUID) -> str:
        return self._names.get(topic_id, "")

    def check(self, topic: str, index: int) -> None:
        info = self.topics.get(topic)
        if info is not None and info.error != ErrorCode.NONE:
            raise KafkaError(info.error)
        if info is None or index not in info.partitions:
            self._refresh_soon()
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def owner(self, topic: str, index: int) -> Address | None:
        if self._expired():
            self._refresh_soon()
        leader = self.leader(topic, index)
        address = None if leader is None else self.brokers.get(leader.node_id)
        if address is None:
            self._refresh_soon()
        return address

    def _expired(self) -> bool:
        return (self._fetched_at is None
                or asyncio.get_running_loop().time() - self._fetched_at >= self.max_age_s)

    def _refresh_soon(self) -> None:
        """A refresh in the background, no sooner than REFRESH_BACKOFF_S after the last."""
        if self._refreshing is not None and not self._refreshing.done():
            return
        loop = asyncio.get_running_loop()
        wait = 0.0 if self._asked_at is None else max(
            0.0, self._asked_at + REFRESH_BACKOFF_S - loop.time())
        self._refreshing = loop.create_task(self._fetch(wait))
        # A background refresh that fails leaves the old answer; the next use asks again.
        self._refreshing.add_done_callback(
            lambda task: task.cancelled() or task.exception())

    async def _fetch(self, delay: float) -> None:
        await asyncio.sleep(delay)
        request = MetadataRequest(
            topics=None if self.wanted is None else [MetadataRequestTopic(name=name)
                                                     for name in self.wanted],
            allow_auto_topic_creation=False)
        failures = []
        loop = asyncio.get_running_loop()
        self._asked_at = loop.time()
        deadline = self._asked_at + self.request_timeout_s    # for all the brokers asked
        for address in dict.fromkeys([*self.brokers.values(), *self.bootstrap]):
            try:
                response = await asyncio.wait_for(
                    self.links.get(*address).request(request, METADATA_VERSION),
                    max(0.0, deadline - loop.time()))
            except (LinkError, OSError, TimeoutError) as error:
                failures.append(f"{address[0]}:{address[1]}: {error or 'timed out'}")
                continue
            self._take(response)
            return
        raise LinkError(f"no broker answered Metadata ({'; '.join(failures)})")

    def _take(self, response: MetadataResponse) -> None:
        self.brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        topics: dict[str, TopicMetadata] = {}
        for answer in response.topics:
            if not answer.name:
                continue
            known = self.topics.get(answer.name)
            info = topics[answer.name] = TopicMetadata(answer.name, answer.topic_id,
                                                       ErrorCode(answer.error_code))
            for partition in answer.partitions:
                leader = PartitionLeader(partition.leader_id, partition.leader_epoch)
                before = None if known is None or known.topic_id != answer.topic_id \
                    else known.partitions.get(partition.partition_index)
                info.partitions[partition.partition_index] = \
                    before if before is not None and before.epoch > leader.epoch else leader
        self.topics = topics
        self._names = {info.topic_id: name for name, info in topics.items()
                       if info.topic_id.int}
        self._fetched_at = asyncio.get_running_loop().time()

    def close(self) -> None:
        """Stop a refresh under way (the links are the caller's)."""
        if self._refreshing is not None:
            self._refreshing.cancel()
