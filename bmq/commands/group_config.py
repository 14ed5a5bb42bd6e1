"""`bmq group describe-config` and `bmq group alter-config`: a group's configs (Kafka's GROUP
config resource: KIP-848's session and heartbeat intervals, share groups' settings, KIP-1191's
dead-letter topic), as `kafka-configs.sh --entity-type groups` shows and changes them."""

from __future__ import annotations

from collections.abc import Sequence

import click

from bmq.commands.common import (
    Connection,
    connection_options,
    output_option,
    parse_key_values,
    print_json,
)
from bmq.commands.configs import alter_configs, describe_configs, print_configs


@click.command("describe-config")
@click.argument("group_id", metavar="GROUP")
@click.option("--all-configs", is_flag=True, help="Show defaults too, not only overrides.")
@output_option
@connection_options
def describe_config(conn: Connection, group_id: str, all_configs: bool, output: str) -> None:
    """Show the configs of group GROUP (set ones; --all-configs for every one).

    \b
    Example:
      bmq group describe-config payments --all-configs
    """
    from confluent_kafka.admin import ResourceType

    configs = describe_configs(conn, ResourceType.GROUP, group_id)
    if output == "json":
        print_json({"group": group_id, "configs": configs})
    else:
        print_configs(configs, all_configs)


@click.command("alter-config")
@click.argument("group_id", metavar="GROUP")
@click.option("-s", "--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Set a group config (repeatable).")
@click.option("-d", "--delete", "deletes", multiple=True, metavar="KEY",
              help="Remove a config, back to the broker default (repeatable).")
@connection_options
def alter_config(conn: Connection, group_id: str, sets: Sequence[str],
                 deletes: Sequence[str]) -> None:
    """Change configs of group GROUP; the group need not exist yet (as in Kafka).

    Only the named configs change (IncrementalAlterConfigs); the others keep their values.

    \b
    Examples:
      bmq group alter-config payments --set share.auto.offset.reset=earliest
      bmq group alter-config payments --set errors.deadletterqueue.topic.name=dlq.payments
      bmq group alter-config payments --delete consumer.session.timeout.ms
    """
    from confluent_kafka.admin import ResourceType

    updates = parse_key_values(sets, "--set")
    if not updates and not deletes:
        raise click.UsageError("nothing to change: give --set or --delete")
    alter_configs(conn, ResourceType.GROUP, group_id, updates, deletes)
