"""`bmq acl add|list|remove`: manage ACLs (CreateAcls, DescribeAcls, DeleteAcls through the
client library's admin calls), as Kafka's kafka-acls.sh does."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from bmq.commands.common import (
    Connection,
    connection_options,
    counted,
    output_option,
    print_json,
    print_table,
    say,
)

F = TypeVar("F", bound=Callable[..., Any])
OPERATIONS = ("ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
              "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE")


@click.group()
def acl() -> None:
    """Add, list and remove ACLs (the broker needs `authorizer.class.name` set).

    \b
    Examples:
      bmq acl add --allow --principal User:alice --operation WRITE --topic orders --prefixed
      bmq acl add --deny --principal User:alice --operation WRITE --topic orders-eu
      bmq acl add --allow --principal User:alice --operation READ --group billing
      bmq acl list --topic orders
      bmq acl remove --principal User:alice --topic orders-eu
    """


def resource_options(command: F) -> F:
    """The resource (one of --topic, --group, --transactional-id, --cluster) and pattern."""
    options = [
        click.option("--topic", help="A topic (or, with --prefixed, a prefix of names)."),
        click.option("--group", help="A consumer group."),
        click.option("--transactional-id", help="A transactional id."),
        click.option("--cluster", is_flag=True, help="The cluster."),
        click.option("--prefixed", is_flag=True, help="Match names starting with the name."),
        click.option("--principal", help="User:NAME, or User:* for everyone."),
        click.option("--operation", type=click.Choice(OPERATIONS, case_sensitive=False),
                     help="The operation."),
        click.option("--host", default="*", show_default=True, help="Client host."),
    ]
    return functools.reduce(lambda c, option: option(c), reversed(options), command)


def _resource(topic: str | None, group: str | None, transactional_id: str | None,
              cluster: bool, required: bool) -> tuple[Any, str | None]:
    from confluent_kafka.admin import ResourceType

    given = [(ResourceType.TOPIC, topic), (ResourceType.GROUP, group),
             (ResourceType.TRANSACTIONAL_ID, transactional_id)]
    chosen = [(t, n) for t, n in given if n is not None]
    if cluster:
        chosen.append((ResourceType.BROKER, "kafka-cluster"))
    if len(chosen) > 1:
        raise click.UsageError("give one of --topic, --group, --transactional-id, --cluster")
    if not chosen:
        if required:
            raise click.UsageError("give one of --topic, --group, --transactional-id, "
                                   "--cluster")
        return ResourceType.ANY, None
    return chosen[0]


@acl.command()
@click.option("--allow/--deny", default=True, help="ALLOW (default) or DENY.")
@resource_options
@connection_options
def add(conn: Connection, allow: bool, topic: str | None, group: str | None,
        transactional_id: str | None, cluster: bool, prefixed: bool, principal: str | None,
        operation: str | None, host: str) -> None:
    """Add one ACL."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
    )

    if principal is None or operation is None:
        raise click.UsageError("--principal and --operation are required")
    resource_type, name = _resource(topic, group, transactional_id, cluster, required=True)
    assert name is not None
    binding = AclBinding(resource_type, name,
                         ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL,
                         principal, host, AclOperation[operation.upper()],
                         AclPermissionType.ALLOW if allow else AclPermissionType.DENY)
    (future,) = conn.admin().create_acls([binding], request_timeout=conn.timeout).values()
    conn.wait(future, "cannot add the ACL")
    say(f"added: {'ALLOW' if allow else 'DENY'} {principal} {operation.upper()} on "
        f"{resource_type.name} {name}{' (prefixed)' if prefixed else ''}")


def _filter(topic: str | None, group: str | None, transactional_id: str | None, cluster: bool,
            prefixed: bool, principal: str | None, operation: str | None,
            host: str | None) -> Any:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
    )

    resource_type, name = _resource(topic, group, transactional_id, cluster, required=False)
    pattern = ResourcePatternType.PREFIXED if prefixed else (
        ResourcePatternType.LITERAL if name is not None else ResourcePatternType.ANY)
    # None matches anything (the client library's type stubs say str only).
    anything: Any = None
    return AclBindingFilter(resource_type, anything if name is None else name, pattern,
                            anything if principal is None else principal,
                            anything if host in (None, "*") else host,
                            AclOperation[operation.upper()] if operation else AclOperation.ANY,
                            AclPermissionType.ANY)


def _rows(bindings: list[Any]) -> list[tuple[str, ...]]:
    return sorted((b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host,
                   b.operation.name, b.permission_type.name) for b in bindings)


COLUMNS = ["RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"]


@acl.command("list")
@resource_options
@output_option
@connection_options
def list_(conn: Connection, output: str, **filters: Any) -> None:
    """List the ACLs matching the options (all of them without any)."""
    bindings = conn.wait(conn.admin().describe_acls(_filter(**filters),
                                                    request_timeout=conn.timeout),
                         "cannot list ACLs")
    rows = _rows(bindings)
    if output == "json":
        print_json([dict(zip([c.lower() for c in COLUMNS], row, strict=True)) for row in rows])
    else:
        print_table(None, COLUMNS, rows)


@acl.command()
@resource_options
@connection_options
def remove(conn: Connection, **filters: Any) -> None:
    """Remove the ACLs matching the options."""
    if not any(filters[k] for k in ("topic", "group", "transactional_id", "cluster",
                                    "principal")):
        raise click.UsageError("name a resource or a principal (removing every ACL is "
                               "not done by accident)")
    (future,) = conn.admin().delete_acls([_filter(**filters)],
                                         request_timeout=conn.timeout).values()
    removed = conn.wait(future, "cannot remove ACLs")
    say(f"removed {counted(len(removed), 'ACL')}")
