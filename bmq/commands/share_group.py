"""Share groups (KIP-932) in `bmq group list` and `bmq group describe`: listed by every broker
(ListGroups v5, type ``share``), described by their coordinator (ShareGroupDescribe: members
and assignments) and by the brokers that lead their partitions (BmqDescribeSharePartitions:
per share-partition the start and end offsets, records in flight, available again and
archived, and the lag)."""

from __future__ import annotations

from typing import Any

import click

from bmq.commands.common import Connection, UnreachableError, counted, print_table
from bmq.commands.wire import brokers, call

GROUP_TYPE = "share"
LIST_GROUPS_VERSION = 5
DESCRIBE_VERSION = 1


def list_share_groups(conn: Connection) -> list[tuple[str, str, str, str]]:
    """(group, state, type, protocol) of every share group, as each coordinator lists them."""
    from bmq.protocol.messages import ListGroupsRequest

    rows = set()
    for address in brokers(conn):
        answer = _ask(conn, address, ListGroupsRequest(types_filter=[GROUP_TYPE]),
                      LIST_GROUPS_VERSION)
        if answer is not None:
            rows |= {(g.group_id, state_name(g.group_state), GROUP_TYPE, GROUP_TYPE)
                     for g in answer.groups}
    return sorted(rows)


def state_name(state: str | None) -> str:
    """A share group's state as the other groups' are shown: STABLE, EMPTY (the wire's
    KIP-932 names are Stable, Empty, ...)."""
    return (state or "Empty").upper()


def _ask(conn: Connection, address: tuple[str, int], request: Any, version: int) -> Any:
    """``call``, or None from a broker that closes the connection on the request: one that
    has no share groups (a Kafka broker closes it on an API it does not serve)."""
    try:
        return call(conn, address, request, version)
    except UnreachableError:
        return None


def describe_share_group(conn: Connection, group_id: str) -> dict[str, Any] | None:
    """The share group's description, or None if ``group_id`` is no share group."""
    from bmq.protocol.errors import ErrorCode
    from bmq.protocol.messages import FindCoordinatorRequest, ShareGroupDescribeRequest

    addresses = brokers(conn)
    found = call(conn, addresses[0], FindCoordinatorRequest(key=group_id), 3)
    if found.error_code != ErrorCode.NONE:
        return None
    answer = _ask(conn, (found.host, found.port),
                  ShareGroupDescribeRequest(group_ids=[group_id]), DESCRIBE_VERSION)
    if answer is None or answer.groups[0].error_code != ErrorCode.NONE:
        return None
    group = answer.groups[0]
    partitions = _share_partitions(conn, addresses, group_id)
    members = [{
        "member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
        "epoch": m.member_epoch, "subscribed": list(m.subscribed_topic_names),
        "assignment": sorted(f"{t.topic_name}-{p}" for t in m.assignment.topic_partitions
                             for p in t.partitions),
    } for m in group.members]
    return {
        "group": group_id, "type": GROUP_TYPE,
        "state": state_name(group.group_state), "protocol": GROUP_TYPE,
        "group_epoch": group.group_epoch, "assignor": group.assignor_name or None,
        "coordinator": f"{found.node_id} ({found.host}:{found.port})",
        "members": members,
        "in_flight": sum(p["in_flight"] for p in partitions),
        "archived": sum(p["archived"] for p in partitions),
        "total_lag": sum(p["lag"] for p in partitions),
        "partitions": partitions,
    }


def _share_partitions(conn: Connection, addresses: list[tuple[str, int]],
                      group_id: str) -> list[dict[str, Any]]:
    from bmq.protocol.messages import BmqDescribeSharePartitionsRequest

    rows = []
    for address in addresses:
        answer = _ask(conn, address, BmqDescribeSharePartitionsRequest(group_id=group_id), 0)
        if answer is None:
            continue
        rows += [{
            "topic": p.topic_name, "partition": p.partition_index,
            "start_offset": p.start_offset, "end_offset": p.end_offset,
            "high_watermark": p.high_watermark, "in_flight": p.in_flight,
            "available": p.available, "acknowledged": p.acknowledged,
            "archived": p.archived, "lag": p.lag,
        } for p in answer.partitions]
    return sorted(rows, key=lambda r: (r["topic"], r["partition"]))


def print_share_group(doc: dict[str, Any]) -> None:
    click.echo(f"Share group {doc['group']}: {doc['state']}, epoch {doc['group_epoch']}, "
               f"{counted(len(doc['members']), 'member')}, assignor {doc['assignor'] or '-'}, "
               f"coordinator {doc['coordinator']}, {doc['in_flight']} in flight, "
               f"{doc['archived']} archived, total lag {doc['total_lag']}")
    print_table(None, ("MEMBER-ID", "CLIENT-ID", "HOST", "EPOCH", "ASSIGNMENT"),
                [(m["member_id"], m["client_id"], m["host"], m["epoch"],
                  ",".join(m["assignment"])) for m in doc["members"]], right=("EPOCH",))
    print_table(None, ("TOPIC", "PARTITION", "START", "END", "HIGH-WATERMARK", "IN-FLIGHT",
                       "AVAILABLE", "ARCHIVED", "LAG"),
                [(r["topic"], r["partition"], r["start_offset"], r["end_offset"],
                  r["high_watermark"], r["in_flight"], r["available"], r["archived"], r["lag"])
                 for r in doc["partitions"]],
                right=("PARTITION", "START", "END", "HIGH-WATERMARK", "IN-FLIGHT", "AVAILABLE",
                       "ARCHIVED", "LAG"))
    click.echo()
