"""`bmq group ...`: list, describe (with lag), reset offsets of, and delete consumer groups;
describe and change their configs (``group_config``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import click

from bmq.commands.common import (
    Connection,
    connection_options,
    counted,
    fail,
    output_option,
    print_json,
    print_table,
    say,
)
from bmq.commands.group_config import alter_config, describe_config
from bmq.commands.share_group import (
    GROUP_TYPE,
    describe_share_group,
    list_share_groups,
    print_share_group,
)

#: States in which a group has no live members, so its offsets may be changed from outside.
INACTIVE = ("EMPTY", "DEAD", "UNKNOWN")


@click.group()
def group() -> None:
    """List, describe, reset the offsets of, delete, and configure consumer groups.

    \b
    Examples:
      bmq group list
      bmq group describe billing
      bmq group reset-offsets billing --topic orders --to-earliest            # dry run
      bmq group reset-offsets billing --topic orders --to-earliest --execute
      bmq group delete billing
    """


def _state(description: Any) -> str:
    state = description.state
    return str(getattr(state, "name", state)).upper()


@group.command("list")
@output_option
@connection_options
def list_(conn: Connection, output: str) -> None:
    """List consumer and share groups with their state and protocol (classic, KIP-848's
    consumer, or KIP-932's share).

    \b
    Example:
      bmq group list -o json
    """
    result = conn.wait(conn.admin().list_consumer_groups(request_timeout=conn.timeout),
                       "cannot list groups")
    shared = list_share_groups(conn)
    share_ids = {row[0] for row in shared}
    rows = sorted([*shared, *((g.group_id, str(getattr(g.state, "name", g.state)),
                               "simple" if g.is_simple_consumer_group else "consumer",
                               _protocol(g))
                              for g in result.valid if g.group_id not in share_ids)])
    if output == "json":
        print_json([{"group": g, "state": s, "type": t, "protocol": p} for g, s, t, p in rows])
    else:
        print_table(None, ("GROUP", "STATE", "TYPE", "PROTOCOL"), rows)
    for error in result.errors:
        say(f"warning: {error}")


def _protocol(group: Any) -> str:
    """The group's protocol as ListGroups v5 / ConsumerGroupDescribe tell it (KIP-848)."""
    kind = getattr(group, "type", None)
    name = str(getattr(kind, "name", kind or "unknown")).lower()
    return "-" if name == "unknown" else name


def _describe(conn: Connection, group_id: str) -> Any:
    admin = conn.admin()
    futures = admin.describe_consumer_groups([group_id], request_timeout=conn.timeout)
    return conn.wait(futures[group_id], f"cannot describe group {group_id}")


def _committed(conn: Connection, group_id: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets; partitions without one are left out."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = conn.admin().list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group_id)], request_timeout=conn.timeout)
    result = conn.wait(futures[group_id], f"cannot fetch offsets of group {group_id}")
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or []
            if tp.offset >= 0 and tp.error is None}


def _offsets(conn: Connection, partitions: list[tuple[str, int]], spec: Any,
             what: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import TopicPartition

    if not partitions:
        return {}
    futures = conn.admin().list_offsets({TopicPartition(t, p): spec for t, p in partitions},
                                        request_timeout=conn.timeout)
    return {(tp.topic, tp.partition): conn.wait(f, what).offset for tp, f in futures.items()}


def describe_group(conn: Connection, group_id: str) -> dict[str, Any]:
    from confluent_kafka.admin import OffsetSpec

    description = _describe(conn, group_id)
    committed = _committed(conn, group_id)
    state = _state(description)
    if state == "DEAD" and not committed and not description.members:
        fail(f"unknown group {group_id!r}")
    owners: dict[tuple[str, int], Any] = {}
    for member in description.members:
        for tp in member.assignment.topic_partitions if member.assignment else []:
            owners[(tp.topic, tp.partition)] = member
    keys = sorted(set(committed) | set(owners))
    known = conn.metadata(refresh=True).topics
    live = [k for k in keys if k[0] in known and k[1] in known[k[0]].partitions]
    ends = _offsets(conn, live, OffsetSpec.latest(), "end offsets")
    rows = []
    for key in keys:
        member = owners.get(key)
        current = committed.get(key)
        end = ends.get(key)
        rows.append({
            "topic": key[0], "partition": key[1], "committed_offset": current,
            "end_offset": end,
            "lag": None if current is None or end is None else max(0, end - current),
            "consumer_id": member.member_id if member else None,
            "host": member.host if member else None,
            "client_id": member.client_id if member else None,
        })
    coordinator = description.coordinator
    return {
        "group": group_id, "state": state, "protocol": _protocol(description),
        "assignor": description.partition_assignor or None,
        "coordinator": f"{coordinator.id} ({coordinator.host}:{coordinator.port})"
        if coordinator else None,
        "members": len(description.members),
        "total_lag": sum(r["lag"] or 0 for r in rows),
        "partitions": rows,
    }


@group.command()
@click.argument("group_ids", metavar="GROUP...", nargs=-1, required=True)
@output_option
@connection_options
def describe(conn: Connection, group_ids: Sequence[str], output: str) -> None:
    """Show the state, members, and per partition the committed offset, end offset and lag;
    for a share group its members' assignments and per share-partition the records in
    flight, available again and archived, and the lag.

    \b
    Example:
      bmq group describe billing
    """
    docs = [describe_share_group(conn, g) or describe_group(conn, g) for g in group_ids]
    if output == "json":
        print_json(docs if len(docs) > 1 else docs[0])
        return
    for doc in docs:
        if doc.get("type") == GROUP_TYPE:
            print_share_group(doc)
            continue
        click.echo(f"Group {doc['group']}: {doc['state']}, protocol {doc['protocol']}, "
                   f"{counted(doc['members'], 'member')}, "
                   f"assignor {doc['assignor'] or '-'}, coordinator {doc['coordinator'] or '-'}, "
                   f"total lag {doc['total_lag']}")
        print_table(None, ("TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "CONSUMER-ID",
                           "HOST", "CLIENT-ID"),
                    [(r["topic"], r["partition"], r["committed_offset"], r["end_offset"],
                      r["lag"], r["consumer_id"], r["host"], r["client_id"])
                     for r in doc["partitions"]],
                    right=("PARTITION", "COMMITTED", "END", "LAG"))
        click.echo()


def _parse_topic(conn: Connection, text: str) -> list[tuple[str, int]]:
    """``topic`` (every partition) or ``topic:0,2``."""
    name, _, wanted = text.partition(":")
    existing = conn.topic_partitions(name)
    if not wanted:
        return [(name, p) for p in existing]
    chosen = []
    for part in wanted.split(","):
        if not part.strip().isdigit() or int(part) not in existing:
            fail(f"topic {name} has no partition {part!r} (it has {len(existing)})")
        chosen.append((name, int(part)))
    return chosen


def parse_datetime(text: str) -> int:
    """ISO 8601 (naive means UTC) to milliseconds since the epoch."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"not an ISO 8601 date-time: {text!r}",
                                 param_hint="--to-datetime") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


@group.command("reset-offsets")
@click.argument("group_id", metavar="GROUP")
@click.option("-t", "--topic", "topics", multiple=True, metavar="TOPIC[:P,P...]",
              help="Reset this topic's partitions, or the ones listed (repeatable).")
@click.option("--all-topics", is_flag=True, help="Every topic the group has offsets for.")
@click.option("--to-earliest", is_flag=True, help="To the log start offset.")
@click.option("--to-latest", is_flag=True, help="To the log end offset (skip everything).")
@click.option("--to-offset", type=int, metavar="N",
              help="To offset N (kept within each partition's earliest..latest).")
@click.option("--to-datetime", metavar="ISO8601",
              help="To the first message at or after this time, e.g. 2026-11-21T08:00:00Z "
                   "(no zone: UTC).")
@click.option("--shift-by", type=int, metavar="N",
              help="Move the committed offsets by N (negative: back).")
@click.option("--execute", is_flag=True, help="Do it; without this only the plan is shown.")
@output_option
@connection_options
def reset_offsets(conn: Connection, group_id: str, topics: Sequence[str], all_topics: bool,
                  to_earliest: bool, to_latest: bool, to_offset: int | None,
                  to_datetime: str | None, shift_by: int | None, execute: bool,
                  output: str) -> None:
    """Set the committed offsets of GROUP, which must have no live members.

    Without --execute this is a dry run: it prints the plan and changes nothing.

    \b
    Examples:
      bmq group reset-offsets billing -t orders --to-earliest
      bmq group reset-offsets billing -t orders:0,1 --to-offset 1000 --execute
      bmq group reset-offsets billing --all-topics --to-datetime 2026-11-21T08:00:00Z --execute
      bmq group reset-offsets billing -t orders --shift-by -100 --execute
    """
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    chosen = [name for name, on in (("--to-earliest", to_earliest), ("--to-latest", to_latest),
                                    ("--to-offset", to_offset is not None),
                                    ("--to-datetime", to_datetime is not None),
                                    ("--shift-by", shift_by is not None)) if on]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-offset, "
                               "--to-datetime, --shift-by")
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic (repeatable) or --all-topics")
    timestamp = parse_datetime(to_datetime) if to_datetime is not None else None
    description = _describe(conn, group_id)
    state = _state(description)
    if state not in INACTIVE or description.members:
        fail(f"group {group_id} is not empty (state {state}, "
             f"{counted(len(description.members), 'member')}): stop its consumers first")
    committed = _committed(conn, group_id)
    if all_topics:
        partitions = sorted(committed)
        if not partitions:
            fail(f"group {group_id} has no committed offsets; name the topics with --topic")
    else:
        partitions = sorted({tp for text in topics for tp in _parse_topic(conn, text)})
    earliest = _offsets(conn, partitions, OffsetSpec.earliest(), "earliest offsets")
    latest = _offsets(conn, partitions, OffsetSpec.latest(), "end offsets")
    by_time: dict[tuple[str, int], int] = {}
    if timestamp is not None:
        by_time = _offsets(conn, partitions, OffsetSpec.for_timestamp(timestamp),
                           "offsets by time")
    plan = []
    for key in partitions:
        low, high = earliest[key], latest[key]
        if to_earliest:
            target = low
        elif to_latest:
            target = high
        elif to_offset is not None:
            target = to_offset
        elif timestamp is not None:
            found = by_time[key]
            target = found if found >= 0 else high  # nothing that late: the end
        else:
            assert shift_by is not None
            target = committed.get(key, low) + shift_by
        plan.append((key, committed.get(key), min(max(target, low), high)))
    if execute:
        request = ConsumerGroupTopicPartitions(
            group_id, [TopicPartition(t, p, new) for (t, p), _, new in plan])
        futures = conn.admin().alter_consumer_group_offsets([request],
                                                            request_timeout=conn.timeout)
        result = conn.wait(futures[group_id], f"cannot reset offsets of group {group_id}")
        errors = [f"{tp.topic}-{tp.partition}: {tp.error}" for tp in result.topic_partitions
                  if tp.error is not None]
        if errors:
            fail("some offsets were not reset: " + "; ".join(errors))
    if output == "json":
        print_json({"group": group_id, "executed": execute, "partitions": [
            {"topic": t, "partition": p, "committed_offset": old, "new_offset": new}
            for (t, p), old, new in plan]})
    else:
        print_table(None, ("TOPIC", "PARTITION", "COMMITTED", "NEW-OFFSET"),
                    [(t, p, old, new) for (t, p), old, new in plan],
                    right=("PARTITION", "COMMITTED", "NEW-OFFSET"))
    if execute:
        say(f"reset {counted(len(plan), 'offset')} of group {group_id}")
    else:
        say("dry run: nothing changed (add --execute to apply)")


@group.command()
@click.argument("group_ids", metavar="GROUP...", nargs=-1, required=True)
@connection_options
def delete(conn: Connection, group_ids: Sequence[str]) -> None:
    """Delete consumer groups (and their committed offsets); they must be empty.

    \b
    Example:
      bmq group delete billing old-billing
    """
    from confluent_kafka import KafkaException

    futures = conn.admin().delete_consumer_groups(list(group_ids), request_timeout=conn.timeout)
    failed = []
    for group_id in group_ids:
        try:
            futures[group_id].result(timeout=conn.timeout + 5)
            say(f"deleted group {group_id}")
        except KafkaException as exc:
            error = exc.args[0]
            failed.append(f"{group_id}: {error.name()}: {error.str()}")
    if failed:
        fail("cannot delete " + "; ".join(failed))


group.add_command(describe_config)
group.add_command(alter_config)
