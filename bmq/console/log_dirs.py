"""Sizes and storage from DescribeLogDirs, asked of every broker as Kafka's tools ask it
(``kafka-log-dirs``, Admin.describeLogDirs). A BMQ broker answers one "log dir", the cluster's
shared storage named by its URL without credentials, with the bytes of the partitions it has
open; a partition no broker has open (just after a start, before `bmq serve`'s loader reached
it; in a cluster, while it moves) is not reported, so a topic's size is "at least" until every
partition of it was reported. Failures leave sizes unknown
rather than failing the page: a cluster that does not answer DescribeLogDirs still browses."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bmq.console.admin import ClusterAdmin, ConsoleError
from bmq.console.pages import ConsolePages
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import DescribeLogDirsRequest
from bmq.protocol.messages.describe_log_dirs_request import DescribableLogDirTopic

# Version 4 (Kafka 3.3) adds a directory's total and usable bytes.
DESCRIBE_LOG_DIRS_VERSION = 4

Partition = tuple[str, int]


@dataclass
class LogDirs:
    """What the brokers reported: partition sizes and their storage URLs."""

    sizes: dict[Partition, int] = field(default_factory=dict)
    storage: set[str] = field(default_factory=set)
    answered: list[int] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.sizes.values())

    def topic_size(self, topic: str, partitions: int) -> TopicSize:
        found = [size for (name, _), size in self.sizes.items() if name == topic]
        return TopicSize(sum(found), len(found), partitions)


@dataclass(frozen=True)
class TopicSize:
    bytes: int
    reported: int           # partitions some broker reported
    partitions: int

    @property
    def complete(self) -> bool:
        return self.reported >= self.partitions


def describe(admin: ClusterAdmin, partitions: Iterable[Partition] | None = None) -> LogDirs:
    """Every broker's log dirs: of ``partitions``, or all each has open when None."""
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        topics = [DescribableLogDirTopic(topic=name, partitions=indexes)
                  for name, indexes in by_topic.items()]
    found = LogDirs()
    try:
        answers = admin.ask_every_broker(DescribeLogDirsRequest(topics=topics),
                                         DESCRIBE_LOG_DIRS_VERSION)
    except ConsoleError as failure:
        found.failed.append(str(failure))
        return found
    for node, answer in answers.items():
        if answer is None or answer.error_code != ErrorCode.NONE:
            reason = "no answer" if answer is None else ErrorCode(answer.error_code).name
            found.failed.append(f"broker {node}: {reason}")
            continue
        found.answered.append(node)
        for result in answer.results:
            if result.error_code != ErrorCode.NONE:
                continue
            found.storage.add(result.log_dir)
            for topic in result.topics:
                for part in topic.partitions:
                    found.sizes[(topic.name, part.partition_index)] = part.partition_size
    return found


def bytes_size(size: int | TopicSize | None) -> str:
    """A size as the pages show it: ``1.5 MiB``; ``≥`` before a topic's size when some of its
    partitions were not reported, blank when none was."""
    if size is None:
        return ""
    prefix = ""
    if isinstance(size, TopicSize):
        if not size.reported:
            return ""
        prefix = "" if size.complete else "≥ "
        size = size.bytes
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return prefix + (f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}")
        value /= 1024
    return prefix  # not reached: the loop returns at TiB


def routes(console: ConsolePages) -> list[Route]:
    console.templates.env.filters["bytes_size"] = bytes_size

    async def storage(request: Request) -> Response:
        """The Cluster page's storage part: URL(s) and the bytes of every open partition."""
        found = await console._call(describe, console.admin)
        return console.page(request, "storage_part.html", log_dirs=found)

    return [Route("/cluster/storage", storage, name="storage")]
