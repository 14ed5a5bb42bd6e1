"""The console's view of a cluster, asked over the Kafka protocol with confluent-kafka's
AdminClient (never by reading storage): brokers and partition owners, topics and their offsets,
consumer groups and their lag. Every call blocks; the web app runs them in its thread pool."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    ClusterMetadata,
    ConfigResource,
    NewTopic,
)

from bmq.client.requests import Address
from bmq.console.offsets import OffsetReader, Partition
from bmq.metadata.nodes import is_proxy

# librdkafka's own timeouts are far longer; a page should say "unreachable" within seconds.
REQUEST_TIMEOUT_S = 10.0
# Topics a page of the topic list shows: their offsets are asked for each time it is shown.
TOPICS_PER_PAGE = 100


class ConsoleError(Exception):
    """What a page shows in its error box: a failed request, an unknown topic or group."""


@dataclass(frozen=True)
class Node:
    id: int
    host: str
    port: int
    rack: str | None
    is_controller: bool
    partitions: int      # partitions it leads (owns, in BMQ's words)

    @property
    def listener(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class ClusterState:
    cluster_id: str | None
    controller: int | None
    brokers: list[Node]
    proxies: list[Node]
    # topic -> [(partition, owner node id or -1 when none)], internal topics left out
    owners: dict[str, list[tuple[int, int]]]


@dataclass(frozen=True)
class PartitionOffsets:
    partition: int
    leader: int
    start: int
    end: int

    @property
    def records(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class TopicSummary:
    name: str
    partitions: list[PartitionOffsets]
    internal: bool

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def end_offsets(self) -> int:
        return sum(p.end for p in self.partitions)


@dataclass(frozen=True)
class TopicList:
    """One page of the topics whose names contain a filter."""

    topics: list[TopicSummary]
    matching: int           # topics whose names match, on every page
    partitions: int         # their partitions
    page: int               # from 1
    pages: int


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    state: str
    kind: str            # "classic" or "consumer" (KIP-848)


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None
    end: int

    @property
    def lag(self) -> int | None:
        return None if self.committed is None else max(0, self.end - self.committed)


@dataclass(frozen=True)
class Member:
    member_id: str
    client_id: str
    host: str
    assignment: list[tuple[str, int]]


@dataclass
class GroupDetail:
    group_id: str
    state: str
    kind: str
    coordinator: int | None
    members: list[Member] = field(default_factory=list)
    lags: list[PartitionLag] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return self.state.upper() in {"EMPTY", "DEAD"} and not self.members

    @property
    def total_lag(self) -> int:
        return sum(lag.lag or 0 for lag in self.lags)


def _enum_name(value: Any) -> str:
    name = getattr(value, "name", None)
    return str(name if name is not None else value)


class ClusterAdmin:
    """One AdminClient for the console process (librdkafka clients are thread-safe)."""

    def __init__(self, bootstrap: str, properties: dict[str, str] | None = None,
                 metrics_urls: tuple[str, ...] = ()) -> None:
        self.bootstrap = bootstrap
        # The brokers' HTTP ports (``/metrics``, Index Query): brokers do not advertise them.
        self.metrics_urls = metrics_urls
        self._config: dict[str, str | int | float | bool] = {
            "bootstrap.servers": bootstrap, **(properties or {})}
        self._admin = AdminClient(self._config)
        self._offsets = OffsetReader(properties or {}, REQUEST_TIMEOUT_S)

    def close(self) -> None:
        self._offsets.close()

    @property
    def client_config(self) -> dict[str, str | int | float | bool]:
        """What another client of the same cluster (the message browser's consumer) needs."""
        return dict(self._config)

    @property
    def kafka_admin(self) -> AdminClient:
        """The AdminClient, for the pages asking what this class does not (topic configs)."""
        return self._admin

    def result(self, future: Any, what: str) -> Any:
        """``future``'s result; ConsoleError starting with ``what`` when it failed."""
        return self._wait(future, what)

    def _wait(self, future: Any, what: str) -> Any:
        try:
            return future.result(timeout=REQUEST_TIMEOUT_S)
        except KafkaException as error:
            raise ConsoleError(f"{what}: {error.args[0].str()}") from error
        except TimeoutError as error:
            raise ConsoleError(f"{what}: no answer from {self.bootstrap} within "
                               f"{REQUEST_TIMEOUT_S:g} s") from error

    def _metadata(self) -> ClusterMetadata:
        try:
            return self._admin.list_topics(timeout=REQUEST_TIMEOUT_S)
        except KafkaException as error:
            raise ConsoleError(f"cannot reach {self.bootstrap}: {error.args[0].str()}") from error

    def addresses(self) -> list[Address]:
        """Every broker's address, as Metadata names them."""
        return sorted((str(b.host), b.port) for b in self._metadata().brokers.values())

    def partition_counts(self) -> dict[str, int]:
        """Every topic's partition count, by name."""
        return {name: len(t.partitions) for name, t in self._metadata().topics.items()}

    def ask(self, requests: list[tuple[Address, Any]], version: int) -> list[Any]:
        """Kafka requests AdminClient has no call for, each to its broker (``bmq.client``):
        their answers in order, None from a broker that did not answer."""
        return self._offsets.ask_each(requests, version)

    # -- cluster -------------------------------------------------------------------------------

    def cluster_state(self) -> ClusterState:
        metadata = self._metadata()
        described = self._wait(self._admin.describe_cluster(request_timeout=REQUEST_TIMEOUT_S),
                               "cannot describe the cluster")
        controller = None if described.controller is None else described.controller.id
        owners = {name: sorted((p.id, p.leader) for p in topic.partitions.values())
                  for name, topic in metadata.topics.items() if not name.startswith("__")}
        led = Counter(leader for parts in owners.values() for _, leader in parts)
        nodes = [Node(n.id, n.host, n.port, n.rack, n.id == controller, led[n.id])
                 for n in sorted(described.nodes, key=lambda n: n.id)]
        return ClusterState(
            cluster_id=described.cluster_id, controller=controller,
            brokers=[n for n in nodes if not is_proxy(n.id)],
            proxies=[n for n in nodes if is_proxy(n.id)],
            owners=dict(sorted(owners.items())))

    # -- topics --------------------------------------------------------------------------------

    def topics(self, include_internal: bool = False, contains: str = "",
               page: int = 1) -> TopicList:
        metadata = self._metadata()
        names = sorted(name for name in metadata.topics
                       if (include_internal or not name.startswith("__"))
                       and contains.lower() in name.lower())
        pages = max(1, -(-len(names) // TOPICS_PER_PAGE))
        page = min(max(1, page), pages)
        shown = names[(page - 1) * TOPICS_PER_PAGE:page * TOPICS_PER_PAGE]
        return TopicList(self._summaries(metadata, shown), len(names),
                         sum(len(metadata.topics[name].partitions) for name in names),
                         page, pages)

    def topic(self, name: str) -> TopicSummary:
        # Metadata of every topic, not of this one: a request naming a topic creates it on a
        # cluster with auto.create.topics.enable, and a mistyped name must change nothing.
        metadata = self._metadata()
        topic = metadata.topics.get(name)
        if topic is None:
            raise ConsoleError(f"no topic named {name!r}")
        if topic.error is not None:
            raise ConsoleError(f"topic {name!r}: {topic.error.str()}")
        return self._summaries(metadata, [name])[0]

    def _summaries(self, metadata: ClusterMetadata, names: list[str]) -> list[TopicSummary]:
        leaders = {(name, p.id): p.leader
                   for name in names for p in metadata.topics[name].partitions.values()}
        starts, ends = self.offsets(leaders, ("earliest", "latest"), metadata)
        by_topic: dict[str, list[PartitionOffsets]] = {name: [] for name in names}
        for key, leader in sorted(leaders.items()):
            by_topic[key[0]].append(PartitionOffsets(key[1], leader, starts[key], ends[key]))
        return [TopicSummary(name, parts, name.startswith("__"))
                for name, parts in by_topic.items()]

    def offsets(self, partitions: Iterable[Partition], which: tuple[str | int, ...],
                metadata: ClusterMetadata | None = None) -> list[dict[Partition, int]]:
        """For each of ``which`` ("earliest", "latest", a time in ms), each partition's
        offset (OffsetReader.offsets)."""
        return self._offsets.offsets(self.owners(partitions, metadata), *which)

    def owners(self, partitions: Iterable[Partition], metadata: ClusterMetadata | None = None
               ) -> dict[Partition, Address | None]:
        """Each partition's owner's address; None for an unknown partition or no owner."""
        metadata = metadata or self._metadata()
        addresses = {node.id: (str(node.host), node.port) for node in metadata.brokers.values()}
        owners: dict[Partition, Address | None] = {}
        for topic, index in partitions:
            known = metadata.topics.get(topic)
            partition = None if known is None else known.partitions.get(index)
            owners[(topic, index)] = None if partition is None else \
                addresses.get(partition.leader)
        return owners

    def configs(self, kind: str, names: Iterable[str]) -> dict[str, dict[str, str]]:
        """The configs (DescribeConfigs) of the topics or groups (``kind``) ``names``: by
        resource name, by config name."""
        resources = [ConfigResource(kind, name) for name in names]
        if not resources:
            return {}
        futures = self._admin.describe_configs(resources, request_timeout=REQUEST_TIMEOUT_S)
        return {resource.name: {key: entry.value for key, entry in self._wait(
                    future, f"cannot describe the configs of {kind.lower()} "
                            f"{resource.name!r}").items()}
                for resource, future in futures.items()}

    def control(self, node_id: int) -> str | None:
        """What broker ``node_id`` says of the controller it follows (BMQ's read-only broker
        config ``bmq.controller``: a `bmq controller`'s liveness channel, host and pid, or
        `bmq serve`'s embedded one); None from a cluster that does not say (Kafka) or when
        its configs cannot be read."""
        try:
            configs = self.configs("BROKER", [str(node_id)])
        except ConsoleError:
            return None
        return configs.get(str(node_id), {}).get("bmq.controller")

    def ask_every_broker(self, request: Any, version: int) -> dict[int, Any]:
        """``request`` sent to every broker DescribeCluster names (not proxies) at once,
        through ``bmq.client``: each broker's answer by node id, None where none came.
        DescribeCluster, not Metadata: the nodes without every topic's partitions (Metadata of
        10,000 partitions took 0.1-0.3 s)."""
        described = self._wait(self._admin.describe_cluster(request_timeout=REQUEST_TIMEOUT_S),
                               "cannot describe the cluster")
        brokers = sorted((node.id, (str(node.host), node.port))
                         for node in described.nodes if not is_proxy(node.id))
        answers = self._offsets.ask_each([(address, request) for _, address in brokers],
                                         version)
        return {node: answer for (node, _), answer in zip(brokers, answers, strict=True)}

    def create_topic(self, name: str, partitions: int,
                     configs: dict[str, str] | None = None) -> None:
        futures = self._admin.create_topics(
            [NewTopic(name, num_partitions=partitions, config=configs or {})],
            request_timeout=REQUEST_TIMEOUT_S)
        self._wait(futures[name], f"cannot create topic {name!r}")

    def delete_topic(self, name: str) -> None:
        futures = self._admin.delete_topics([name], request_timeout=REQUEST_TIMEOUT_S)
        self._wait(futures[name], f"cannot delete topic {name!r}")

    # -- groups --------------------------------------------------------------------------------

    def groups(self) -> list[GroupListing]:
        result = self._wait(self._admin.list_consumer_groups(request_timeout=REQUEST_TIMEOUT_S),
                            "cannot list groups")
        listings = [GroupListing(g.group_id, _enum_name(g.state).title(),
                                 _enum_name(getattr(g, "type", "classic")).lower())
                    for g in result.valid]
        return sorted(listings, key=lambda g: g.group_id)

    def group(self, group_id: str) -> GroupDetail:
        described = self._wait(self._admin.describe_consumer_groups(
            [group_id], request_timeout=REQUEST_TIMEOUT_S)[group_id],
            f"cannot describe group {group_id!r}")
        state = _enum_name(described.state)
        if state.upper() == "DEAD":
            raise ConsoleError(f"no group named {group_id!r}")
        detail = GroupDetail(
            group_id=group_id, state=state.title(),
            kind=_enum_name(getattr(described, "type", "classic")).lower(),
            coordinator=None if described.coordinator is None else described.coordinator.id)
        for member in described.members:
            assigned = member.assignment.topic_partitions if member.assignment else []
            detail.members.append(Member(
                member.member_id, member.client_id, member.host,
                sorted((tp.topic, tp.partition) for tp in assigned)))
        committed = self.committed_offsets(group_id)
        [ends] = self.offsets([(tp.topic, tp.partition) for tp in committed], ("latest",))
        detail.lags = [PartitionLag(tp.topic, tp.partition,
                                    tp.offset if tp.offset >= 0 else None,
                                    ends.get((tp.topic, tp.partition), -1))
                       for tp in sorted(committed, key=lambda t: (t.topic, t.partition))]
        return detail

    def committed_offsets(self, group_id: str) -> list[TopicPartition]:
        futures = self._admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id)], request_timeout=REQUEST_TIMEOUT_S)
        answer = self._wait(futures[group_id], f"cannot read the offsets of group {group_id!r}")
        return list(answer.topic_partitions or [])

    def set_group_offsets(self, group_id: str, offsets: dict[tuple[str, int], int]) -> None:
        """Commits ``offsets`` for ``group_id``; the broker refuses it unless the group is
        empty (no member would see its position move under it)."""
        request = ConsumerGroupTopicPartitions(
            group_id, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])
        futures = self._admin.alter_consumer_group_offsets(
            [request], request_timeout=REQUEST_TIMEOUT_S)
        answer = self._wait(futures[group_id], f"cannot reset the offsets of group {group_id!r}")
        failed = [tp for tp in answer.topic_partitions or [] if tp.error is not None]
        if failed:
            raise ConsoleError(f"cannot reset the offsets of group {group_id!r}: "
                               f"{failed[0].topic}[{failed[0].partition}]: {failed[0].error.str()}")
