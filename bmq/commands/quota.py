"""`bmq quota set|list|remove`: client quotas (AlterClientQuotas, DescribeClientQuotas), as
Kafka's kafka-configs.sh --entity-type users/clients does, through ``bmq.commands.wire``."""

from __future__ import annotations

from typing import Any

import click

from bmq.commands.common import (
    Connection,
    connection_options,
    fail,
    output_option,
    print_json,
    print_table,
    say,
)
from bmq.commands.wire import brokers, call
from bmq.metadata.quotas import CLIENT_ID, QUOTA_KEYS, USER
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import AlterClientQuotasRequest, DescribeClientQuotasRequest
from bmq.protocol.messages.alter_client_quotas_request import EntityData, EntryData, OpData
from bmq.protocol.messages.describe_client_quotas_request import ComponentData

DEFAULT = "<default>"
VERSION = 1


@click.group()
def quota() -> None:
    """Set, list and remove client quotas (bytes/s produced or fetched, % of request time).

    \b
    Examples:
      bmq quota set --client-id batch-loader --producer-byte-rate 1048576
      bmq quota set --user alice --consumer-byte-rate 5000000
      bmq quota set --user '<default>' --request-percentage 50
      bmq quota list
      bmq quota remove --client-id batch-loader --key producer_byte_rate
    """


def _entity(user: str | None, client_id: str | None) -> list[EntityData]:
    if user is None and client_id is None:
        raise click.UsageError("give --user and/or --client-id ('<default>' for the default)")
    return [EntityData(entity_type=t, entity_name=None if n == DEFAULT else n)
            for t, n in ((USER, user), (CLIENT_ID, client_id)) if n is not None]


def _alter(conn: Connection, entity: list[EntityData], ops: list[OpData]) -> None:
    answer = call(conn, brokers(conn)[0], AlterClientQuotasRequest(
        entries=[EntryData(entity=entity, ops=ops)]), VERSION)
    (entry,) = answer.entries
    if entry.error_code != ErrorCode.NONE:
        fail(f"{ErrorCode(entry.error_code).name}: {entry.error_message or ''}".rstrip(": "))


def _entity_options(command: Any) -> Any:
    command = click.option("--client-id", help="A client id, or '<default>'.")(command)
    return click.option("--user", help="A user (its principal's name), or '<default>'.")(command)


@quota.command("set")
@_entity_options
@click.option("--producer-byte-rate", type=float, help="Bytes per second produced.")
@click.option("--consumer-byte-rate", type=float, help="Bytes per second fetched.")
@click.option("--request-percentage", type=float,
              help="Share of request handling time, in % of one thread.")
@connection_options
def set_(conn: Connection, user: str | None, client_id: str | None,
         producer_byte_rate: float | None, consumer_byte_rate: float | None,
         request_percentage: float | None) -> None:
    """Set quota values of a user, a client id, or both."""
    values = {"producer_byte_rate": producer_byte_rate,
              "consumer_byte_rate": consumer_byte_rate,
              "request_percentage": request_percentage}
    ops = [OpData(key=k, value=v, remove=False) for k, v in values.items() if v is not None]
    if not ops:
        raise click.UsageError("give at least one quota value")
    _alter(conn, _entity(user, client_id), ops)
    say("quota set")


@quota.command()
@_entity_options
@click.option("--key", "keys", multiple=True, type=click.Choice(QUOTA_KEYS),
              help="The value to remove (repeatable; all of them without).")
@connection_options
def remove(conn: Connection, user: str | None, client_id: str | None,
           keys: tuple[str, ...]) -> None:
    """Remove quota values of an entity."""
    _alter(conn, _entity(user, client_id),
           [OpData(key=k, value=0.0, remove=True) for k in keys or QUOTA_KEYS])
    say("quota removed")


@quota.command("list")
@output_option
@connection_options
def list_(conn: Connection, output: str) -> None:
    """Every entity's quota values."""
    answer = call(conn, brokers(conn)[0], DescribeClientQuotasRequest(
        components=[ComponentData(entity_type=USER, match_type=2, match=None)], strict=False),
        VERSION)
    if answer.error_code != ErrorCode.NONE:
        fail(f"{ErrorCode(answer.error_code).name}: {answer.error_message or ''}")
    clients = call(conn, brokers(conn)[0], DescribeClientQuotasRequest(
        components=[ComponentData(entity_type=CLIENT_ID, match_type=2, match=None)],
        strict=True), VERSION)
    rows = []
    for entry in [*(answer.entries or []), *(clients.entries or [])]:
        names = {e.entity_type: DEFAULT if e.entity_name is None else e.entity_name
                 for e in entry.entity}
        for value in entry.values:
            rows.append((names.get(USER, ""), names.get(CLIENT_ID, ""), value.key,
                         value.value))
    rows = sorted(set(rows))
    if output == "json":
        print_json([{"user": u or None, "client_id": c or None, "key": k, "value": v}
                    for u, c, k, v in rows])
    else:
        # Whole numbers in full (a byte rate of 1048576 is not "1.04858e+06").
        print_table(None, ["USER", "CLIENT ID", "KEY", "VALUE"],
                    [(u, c, k, str(int(v)) if v.is_integer() else repr(v))
                     for u, c, k, v in rows], right=["VALUE"])
