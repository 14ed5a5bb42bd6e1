"""`bmq topic ...`: create, list, describe, delete topics and change their configs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from bmq.commands.common import (
    Connection,
    connection_options,
    counted,
    fail,
    output_option,
    parse_key_values,
    print_json,
    print_table,
    say,
)
from bmq.commands.configs import alter_configs, describe_configs, print_configs


@click.group()
def topic() -> None:
    """Create, list, describe and delete topics; change topic configs.

    \b
    Examples:
      bmq topic create orders --partitions 6 --config retention.ms=86400000
      bmq topic list
      bmq topic describe orders
      bmq topic alter-config orders --set retention.ms=3600000 --delete segment.bytes
      bmq topic delete orders
    """


@topic.command()
@click.argument("name")
@click.option("-p", "--partitions", type=int, default=-1,
              help="Partition count [the broker's num_partitions].")
@click.option("-r", "--replication-factor", type=int, default=-1,
              help="Replication factor [the broker's default].")
@click.option("-c", "--config", "configs", multiple=True, metavar="KEY=VALUE",
              help="Topic config, e.g. retention.ms=86400000 (repeatable).")
@click.option("--if-not-exists", is_flag=True, help="Succeed if the topic already exists.")
@click.option("--view-of", "view_of", metavar="SOURCE",
              help="Make NAME a read-only view of topic SOURCE (needs --filter).")
@click.option("--filter", "view_filter", metavar="EXPR",
              help="The view's filter: SQL-92 over record headers, e.g. \"TAG IN ('paid')\".")
@connection_options
def create(conn: Connection, name: str, partitions: int, replication_factor: int,
           configs: Sequence[str], if_not_exists: bool, view_of: str | None,
           view_filter: str | None) -> None:
    """Create topic NAME.

    \b
    Examples:
      bmq topic create orders --partitions 6 -c retention.ms=86400000
      bmq topic create paid-orders --view-of orders --filter "TAG IN ('paid','refunded')"
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    settings = parse_key_values(configs, "--config")
    if (view_of is None) != (view_filter is None):
        fail("--view-of and --filter go together")
    if view_of is not None and view_filter is not None:
        settings.update({"bmq.view.source": view_of, "bmq.view.filter": view_filter})
    admin = conn.admin()
    new = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                   config=settings)
    future = admin.create_topics([new], request_timeout=conn.timeout)[name]
    try:
        future.result(timeout=conn.timeout + 5)
    except KafkaException as exc:
        error = exc.args[0]
        if if_not_exists and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            say(f"topic {name} already exists")
            return
        fail(f"cannot create topic {name}: {error.name()}: {error.str()}")
    say(f"created topic {name}")


@topic.command("list")
@click.option("--internal", is_flag=True, help="Include internal topics (__consumer_offsets).")
@output_option
@connection_options
def list_(conn: Connection, internal: bool, output: str) -> None:
    """List topics with their partition counts.

    \b
    Example:
      bmq topic list -b broker1:9092
    """
    meta = conn.metadata()
    rows = []
    for name in sorted(meta.topics):
        if name.startswith("__") and not internal:
            continue
        rows.append((name, len(meta.topics[name].partitions)))
    if output == "json":
        print_json([{"topic": name, "partitions": count} for name, count in rows])
    else:
        print_table(None, ("TOPIC", "PARTITIONS"), rows, right=("PARTITIONS",))


def _describe_one(conn: Connection, name: str) -> dict[str, Any]:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec, ResourceType

    meta = conn.metadata().topics.get(name)
    if meta is None or (meta.error is not None and not meta.partitions):
        fail(f"unknown topic {name!r}")
    admin = conn.admin()
    ids = sorted(meta.partitions)
    earliest = admin.list_offsets({TopicPartition(name, p): OffsetSpec.earliest() for p in ids},
                                  request_timeout=conn.timeout)
    latest = admin.list_offsets({TopicPartition(name, p): OffsetSpec.latest() for p in ids},
                                request_timeout=conn.timeout)
    low = {tp.partition: conn.wait(f, f"offsets of {name}").offset for tp, f in earliest.items()}
    high = {tp.partition: conn.wait(f, f"offsets of {name}").offset for tp, f in latest.items()}
    configs = describe_configs(conn, ResourceType.TOPIC, name)
    # Scheduled delivery: records held per partition, as "0:12,1:0" (a read-only config).
    held = next((c for c in configs if c["name"] == "bmq.delay.pending"), None)
    scheduled: dict[int, int] = {}
    for item in held["value"].split(",") if held is not None and held["value"] else []:
        index, count = item.split(":")
        scheduled[int(index)] = int(count)
    partitions = []
    for p in ids:
        pm = meta.partitions[p]
        partitions.append({"partition": p, "leader": pm.leader, "replicas": list(pm.replicas),
                           "isr": list(pm.isrs), "low_watermark": low[p],
                           "high_watermark": high[p], "messages": high[p] - low[p]})
        if held is not None:
            partitions[-1]["scheduled_pending"] = scheduled.get(p, 0)
    return {"topic": name, "partition_count": len(ids), "partitions": partitions,
            "configs": configs}


@topic.command()
@click.argument("names", nargs=-1, required=True)
@click.option("--all-configs", is_flag=True, help="Show defaults too, not only overrides.")
@output_option
@connection_options
def describe(conn: Connection, names: Sequence[str], all_configs: bool, output: str) -> None:
    """Show partitions (leader, replicas, watermarks) and configs of topics NAMES.

    \b
    Example:
      bmq topic describe orders payments --all-configs
    """
    docs = [_describe_one(conn, name) for name in names]
    if output == "json":
        print_json(docs if len(docs) > 1 else docs[0])
        return
    for doc in docs:
        columns: tuple[str, ...] = ("PARTITION", "LEADER", "REPLICAS", "ISR", "LOW", "HIGH",
                                    "MESSAGES")
        rows: list[tuple[Any, ...]] = [
            (p["partition"], p["leader"], ",".join(map(str, p["replicas"])),
             ",".join(map(str, p["isr"])), p["low_watermark"], p["high_watermark"],
             p["messages"]) for p in doc["partitions"]]
        scheduled = any("scheduled_pending" in p for p in doc["partitions"])
        if scheduled:     # records held for scheduled delivery, not in the partition yet
            columns += ("SCHEDULED",)
            rows = [(*row, p["scheduled_pending"]) for row, p in zip(rows, doc["partitions"],
                                                                 strict=True)]
        print_table(f"Topic {doc['topic']}: {counted(doc['partition_count'], 'partition')}",
                    columns, rows, right=("PARTITION", "LEADER", "LOW", "HIGH", "MESSAGES",
                                          "SCHEDULED"))
        click.echo()
        print_configs(doc["configs"], all_configs)
        click.echo()


@topic.command()
@click.argument("names", nargs=-1, required=True)
@click.option("--if-exists", is_flag=True, help="Succeed for topics that do not exist.")
@connection_options
def delete(conn: Connection, names: Sequence[str], if_exists: bool) -> None:
    """Delete topics NAMES and all their data.

    \b
    Example:
      bmq topic delete orders
    """
    from confluent_kafka import KafkaError, KafkaException

    admin = conn.admin()
    futures = admin.delete_topics(list(names), request_timeout=conn.timeout)
    failed = []
    for name in names:
        try:
            futures[name].result(timeout=conn.timeout + 5)
            say(f"deleted topic {name}")
        except KafkaException as exc:
            error = exc.args[0]
            if if_exists and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                say(f"topic {name} does not exist")
                continue
            failed.append(f"{name}: {error.name()}: {error.str()}")
    if failed:
        fail("cannot delete " + "; ".join(failed))


@topic.command("alter-config")
@click.argument("name")
@click.option("-s", "--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Set a topic config (repeatable).")
@click.option("-d", "--delete", "deletes", multiple=True, metavar="KEY",
              help="Remove an override, back to the broker default (repeatable).")
@click.option("--partitions", type=int, help="Raise the partition count to this many.")
@connection_options
def alter_config(conn: Connection, name: str, sets: Sequence[str], deletes: Sequence[str],
                 partitions: int | None) -> None:
    """Change configs (and the partition count) of topic NAME.

    Only the named configs change (IncrementalAlterConfigs); the others keep their values.

    \b
    Examples:
      bmq topic alter-config orders --set retention.ms=3600000
      bmq topic alter-config orders --delete retention.ms --partitions 12
    """
    from confluent_kafka.admin import NewPartitions, ResourceType

    updates = parse_key_values(sets, "--set")
    if not updates and not deletes and partitions is None:
        raise click.UsageError("nothing to change: give --set, --delete or --partitions")
    conn.topic_partitions(name)
    if updates or deletes:
        alter_configs(conn, ResourceType.TOPIC, name, updates, deletes)
    if partitions is not None:
        futures = conn.admin().create_partitions([NewPartitions(name, partitions)],
                                                 request_timeout=conn.timeout)
        conn.wait(futures[name], f"cannot change the partition count of {name}")
        say(f"{name} now has {counted(partitions, 'partition')}")
