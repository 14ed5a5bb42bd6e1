"""Configs of a resource (a topic, a group) as `bmq topic` and `bmq group` describe and change
them: DescribeConfigs and IncrementalAlterConfigs through the admin client, as Kafka's
kafka-configs.sh does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from bmq.commands.common import Connection, print_table, say


def describe_configs(conn: Connection, resource_type: Any, name: str
                     ) -> list[dict[str, Any]]:
    """Every config of the resource: name, value, source, whether default or read-only."""
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource(resource_type, name)
    admin = conn.admin()
    entries = conn.wait(admin.describe_configs([resource], request_timeout=conn.timeout)[resource],
                        f"configs of {name}")
    return [{"name": key, "value": entries[key].value, "source": _source_name(entries[key].source),
             "default": bool(entries[key].is_default),
             "read_only": bool(entries[key].is_read_only)}
            for key in sorted(entries)]


def print_configs(configs: list[dict[str, Any]], all_configs: bool) -> None:
    shown = [c for c in configs if all_configs or not c["default"]]
    if shown:
        print_table("Configs" if all_configs else "Configs (overrides; --all-configs for all)",
                    ("NAME", "VALUE", "SOURCE"),
                    [(c["name"], c["value"], c["source"]) for c in shown])
    else:
        click.echo("Configs: all defaults (--all-configs to list them)")


def alter_configs(conn: Connection, resource_type: Any, name: str, updates: dict[str, str],
                  deletes: Sequence[str]) -> None:
    """Set ``updates`` and remove ``deletes`` (IncrementalAlterConfigs); the other configs
    keep their values."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in updates.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                for k in deletes]
    resource = ConfigResource(resource_type, name, incremental_configs=entries)
    futures = conn.admin().incremental_alter_configs([resource], request_timeout=conn.timeout)
    conn.wait(futures[resource], f"cannot change configs of {name}")
    say(f"changed configs of {name}: " + ", ".join(
        [f"{k}={v}" for k, v in updates.items()] + [f"-{k}" for k in deletes]))


def _source_name(source: Any) -> str:
    from confluent_kafka.admin import ConfigSource

    if isinstance(source, int):
        try:
            source = ConfigSource(source)
        except ValueError:
            return str(source)
    return str(getattr(source, "name", source))
