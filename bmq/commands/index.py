"""`bmq index ...` (declare, drop and describe a topic's field indexes) and `bmq query`
(Index Query). Fields are the topic config ``bmq.index.fields``, set with
IncrementalAlterConfigs; progress and queries come from a broker's or proxy's HTTP port (the
one serving ``/metrics``)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any

import click

from bmq.commands.common import (
    EXIT_UNREACHABLE,
    Connection,
    connection_options,
    fail,
    output_option,
    print_json,
    print_table,
    say,
)

INDEX_FIELDS = "bmq.index.fields"
DEFAULT_HTTP = "http://localhost:9100"

_http_option = click.option(
    "--http", "http_url", default=DEFAULT_HTTP, show_default=True, envvar="BMQ_HTTP",
    metavar="URL", help="A broker's or proxy's HTTP port, the one serving /metrics "
    "(or $BMQ_HTTP).")


def _get(base: str, path: str, params: list[tuple[str, str]], timeout: float) -> bytes:
    """GET ``path``: the body, or exit 2 (a malformed query), 1 (other refusals), 3."""
    url = base.rstrip("/") + path + ("?" + urllib.parse.urlencode(params) if params else "")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            body: bytes = answer.read()
            return body
    except urllib.error.HTTPError as error:
        try:
            message = json.loads(error.read())["error"]
        except (ValueError, KeyError, TypeError):
            message = error.reason
        if error.code == 400:
            raise click.UsageError(message) from None
        fail(f"{message} (HTTP {error.code})")
    except (urllib.error.URLError, OSError) as error:
        fail(f"cannot reach {base}: {getattr(error, 'reason', error)}", EXIT_UNREACHABLE)


def _current_fields(conn: Connection, topic: str) -> list[str]:
    from confluent_kafka.admin import ConfigResource, ResourceType

    conn.topic_partitions(topic)
    resource = ConfigResource(ResourceType.TOPIC, topic)
    futures = conn.admin().describe_configs([resource], request_timeout=conn.timeout)
    configs = conn.wait(futures[resource], f"cannot describe {topic}")
    entry = configs.get(INDEX_FIELDS)
    value = entry.value if entry is not None and entry.value else ""
    return [f.strip() for f in value.split(",") if f.strip()]


def _set_fields(conn: Connection, topic: str, fields: list[str]) -> None:
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    entry = ConfigEntry(INDEX_FIELDS, ",".join(fields), incremental_operation=(
        AlterConfigOpType.SET if fields else AlterConfigOpType.DELETE))
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    futures = conn.admin().incremental_alter_configs([resource], request_timeout=conn.timeout)
    conn.wait(futures[resource], f"cannot change the indexes of {topic}")


@click.group()
def index() -> None:
    """Declare, drop and describe field indexes (Index Query).

    \b
    A FIELD is one of:
      key             the record key
      header:NAME     the value of header NAME
      PATH            a dot path into the JSON value, such as order_id or order.id
                      (value:key is a JSON field named key)

    \b
    Examples:
      bmq index create orders --field order_id --field header:trace --field key
      bmq index describe orders --http http://localhost:9100
      bmq index drop orders --field header:trace
    """


@index.command()
@click.argument("topic")
@click.option("-f", "--field", "fields", multiple=True, required=True, metavar="FIELD",
              help="A field to index (repeatable).")
@connection_options
def create(conn: Connection, topic: str, fields: Sequence[str]) -> None:
    """Index FIELDs of TOPIC (added to those it has; built in the background)."""
    current = _current_fields(conn, topic)
    wanted = current + [f.strip() for f in fields if f.strip() not in current]
    _set_fields(conn, topic, wanted)
    say(f"{topic} indexes {', '.join(wanted)}")


@index.command()
@click.argument("topic")
@click.option("-f", "--field", "fields", multiple=True, metavar="FIELD",
              help="A field whose index to drop (repeatable) [all of them].")
@connection_options
def drop(conn: Connection, topic: str, fields: Sequence[str]) -> None:
    """Drop the indexes of TOPIC (or only those of the FIELDs); their files are removed."""
    current = _current_fields(conn, topic)
    unknown = [f for f in fields if f not in current]
    if unknown:
        fail(f"{topic} has no index of {unknown[0]!r} (indexed: {', '.join(current) or 'none'})")
    kept = [f for f in current if fields and f not in fields]
    _set_fields(conn, topic, kept)
    say(f"{topic} indexes {', '.join(kept)}" if kept else f"{topic} indexes nothing")


@index.command()
@click.argument("topic")
@_http_option
@click.option("--timeout", default=10.0, show_default=True, type=float, metavar="SECONDS")
@output_option
def describe(topic: str, http_url: str, timeout: float, output: str) -> None:
    """The indexed fields of TOPIC and how far each partition is indexed."""
    doc = json.loads(_get(http_url, f"/topics/{urllib.parse.quote(topic, safe='')}/index", [],
                          timeout))
    if output == "json":
        print_json(doc)
        return
    say(f"{topic} indexes {', '.join(doc['fields']) or 'nothing'}")
    print_table(None, ["partition", "indexed up to", "high watermark", "log start",
                       "records indexed", "malformed values"],
                [[p["partition"], p["indexed_up_to"], p["high_watermark"],
                  p["log_start_offset"], p["records_indexed"], p["malformed_values"]]
                 for p in doc["partitions"]],
                right=["partition", "indexed up to", "high watermark", "log start",
                       "records indexed", "malformed values"])


@click.command()
@click.argument("topic")
@click.option("-w", "--where", "terms", multiple=True, required=True, metavar="FIELD=VALUE",
              help="An indexed field's value, as text: order_id=42 matches 42 and \"42\" "
              "(repeatable: all must hold).")
@click.option("--from", "start", metavar="TIME",
              help="Only records at or after TIME (ms since the epoch, or ISO-8601).")
@click.option("--to", "end", metavar="TIME", help="Only records at or before TIME.")
@click.option("-n", "--limit", type=click.IntRange(1, 10_000), default=100, show_default=True,
              help="At most this many records.")
@_http_option
@click.option("--timeout", default=30.0, show_default=True, type=float, metavar="SECONDS")
def query(topic: str, terms: Sequence[str], start: str | None, end: str | None, limit: int,
          http_url: str, timeout: float) -> None:
    """Records of TOPIC whose indexed fields have the given values, as JSON lines
    (partition, offset, timestamp, key, value, headers).

    \b
    Examples:
      bmq query orders --where order_id=42
      bmq query orders --where user.id=7 --where header:region=eu --from 2026-11-28T00:00Z
    """
    params: list[tuple[str, Any]] = [("where", term) for term in terms]
    params += [(name, value) for name, value in (("from", start), ("to", end))
               if value is not None]
    params.append(("limit", str(limit)))
    body = _get(http_url, f"/topics/{urllib.parse.quote(topic, safe='')}/query", params, timeout)
    click.echo(body.decode(), nl=False)
