"""Share groups (KIP-932) in the console, asked over the Kafka protocol with BMQ's own client
layer (confluent-kafka's AdminClient has no share-group calls): ListGroups v5 with the type
filter ``share`` to every broker, FindCoordinator and ShareGroupDescribe (members and their
assignments) at the group's coordinator, and BmqDescribeSharePartitions (BMQ's own API, the one
`bmq group describe` uses) to every broker for the share-partitions it leads: start offset and
the records in flight, available again and archived."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bmq.console.admin import ClusterAdmin, ConsoleError, GroupListing
from bmq.console.pages import ConsolePages
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    BmqDescribeSharePartitionsRequest,
    FindCoordinatorRequest,
    ListGroupsRequest,
    ShareGroupDescribeRequest,
)

SHARE = "share"
LIST_GROUPS_VERSION = 5          # the first with a type filter (KIP-848)
FIND_COORDINATOR_VERSION = 3     # one key a request (v4 batches them; v3 is the simplest)
DESCRIBE_VERSION = 1
SHARE_PARTITIONS_VERSION = 0
# KIP-1191's group config: where the group's rejected and given-up records go.
DEAD_LETTER_TOPIC = "errors.deadletterqueue.topic.name"


@dataclass(frozen=True)
class ShareMember:
    member_id: str
    client_id: str
    host: str
    epoch: int
    assignment: list[tuple[str, int]]


@dataclass(frozen=True)
class SharePartitionState:
    """One share-partition as the broker leading it counts its records (between the start
    offset and the end offset, the window of records delivered at least once)."""

    topic: str
    partition: int
    start_offset: int      # every record before it is acknowledged or archived
    end_offset: int        # the next offset never delivered
    high_watermark: int
    in_flight: int         # acquired by a consumer, not acknowledged yet
    available: int         # delivered before, deliverable again (released or timed out)
    archived: int          # rejected or past the delivery limit (dead-lettered if configured)
    lag: int               # from the start offset to the high watermark, not yet done with


@dataclass
class ShareGroupDetail:
    group_id: str
    state: str
    epoch: int
    assignor: str
    coordinator: int
    members: list[ShareMember] = field(default_factory=list)
    partitions: list[SharePartitionState] = field(default_factory=list)
    partitions_error: str | None = None     # why some brokers gave no counts

    @property
    def total_lag(self) -> int:
        return sum(p.lag for p in self.partitions)

    @property
    def in_flight(self) -> int:
        return sum(p.in_flight for p in self.partitions)


def listings(admin: ClusterAdmin) -> list[GroupListing]:
    """Every share group, as each broker (the coordinator of some groups) lists them."""
    addresses = admin.addresses()
    answers = admin.ask([(a, ListGroupsRequest(types_filter=[SHARE])) for a in addresses],
                        LIST_GROUPS_VERSION)
    found = {g.group_id: GroupListing(g.group_id, (g.group_state or "Empty").title(), SHARE)
             for answer in answers if answer is not None for g in answer.groups}
    return sorted(found.values(), key=lambda g: g.group_id)


def describe(admin: ClusterAdmin, group_id: str) -> ShareGroupDetail:
    """The share group's members, assignments and share-partitions; ConsoleError for a
    group that is no share group."""
    addresses = admin.addresses()
    [found] = admin.ask([(addresses[0], FindCoordinatorRequest(key=group_id))],
                        FIND_COORDINATOR_VERSION)
    if found is None or found.error_code != ErrorCode.NONE:
        raise ConsoleError(f"cannot find the coordinator of group {group_id!r}")
    [answer] = admin.ask([((found.host, found.port),
                           ShareGroupDescribeRequest(group_ids=[group_id]))], DESCRIBE_VERSION)
    if answer is None:
        raise ConsoleError(f"the coordinator of {group_id!r} did not answer")
    group = answer.groups[0]
    if group.error_code != ErrorCode.NONE:
        raise ConsoleError(f"no share group named {group_id!r}")
    detail = ShareGroupDetail(group_id, (group.group_state or "Empty").title(),
                              group.group_epoch, group.assignor_name, found.node_id)
    detail.members = [ShareMember(
        m.member_id, m.client_id, m.client_host, m.member_epoch,
        sorted((t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions))
        for m in group.members]
    counted = admin.ask([(a, BmqDescribeSharePartitionsRequest(group_id=group_id))
                         for a in addresses], SHARE_PARTITIONS_VERSION)
    refused = [ErrorCode(answer.error_code).name for answer in counted
               if answer is not None and answer.error_code != ErrorCode.NONE]
    if refused:   # e.g. a principal without CLUSTER permission on a secured cluster
        detail.partitions_error = f"share-partition counts refused: {refused[0]}"
    detail.partitions = sorted((SharePartitionState(
        p.topic_name, p.partition_index, p.start_offset, p.end_offset, p.high_watermark,
        p.in_flight, p.available, p.archived, p.lag)
        for answer in counted if answer is not None and answer.error_code == ErrorCode.NONE
        for p in answer.partitions), key=lambda p: (p.topic, p.partition))
    return detail


def routes(console: ConsolePages) -> list[Route]:
    async def page(request: Request, template: str, whole: bool) -> Response:
        group_id = request.path_params["group_id"]
        try:
            group = await console._call(describe, console.admin, group_id)
        except ConsoleError as failure:
            return console.page(request, template, status=404, group_id=group_id, group=None,
                                error=str(failure))
        return console.page(request, template, group_id=group_id, group=group,
                            dead_letter_topic=await dead_letter_topic(group_id) if whole
                            else None)

    async def dead_letter_topic(group_id: str) -> str | None:
        """The group's dead-letter topic, for a link (the whole page only: not polled); None
        too from a cluster that has no group configs."""
        try:
            configs = await console._call(console.admin.configs, "GROUP", [group_id])
        except ConsoleError:
            return None
        return configs[group_id].get(DEAD_LETTER_TOPIC) or None

    async def share_group(request: Request) -> Response:
        return await page(request, "share_group.html", True)

    async def share_group_live(request: Request) -> Response:
        return await page(request, "share_group_live.html", False)

    return [Route("/share-groups/{group_id}", share_group, name="share_group"),
            Route("/share-groups/{group_id}/live", share_group_live, name="share_group_live")]
