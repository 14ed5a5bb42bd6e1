"""`bmq mirror`: run a mirror, show how far behind its topics are, promote a mirrored topic."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, NoReturn, TypeVar

import click

from bmq.client.login import PropertyError
from bmq.listeners import ListenerError
from bmq.logs import setup_logging
from bmq.mirror.cluster import Cluster
from bmq.mirror.service import CLIENT_ID, Mirror
from bmq.mirror.settings import SettingsError, load_settings
from bmq.mirror.status import mirror_status
from bmq.mirror.topics import promote_topics
from bmq.net.client import LinkError
from bmq.role_options import fail, key_values_or_exit
from bmq.startup import ExitCode

T = TypeVar("T")
EXIT_FAILED = 1
EXIT_UNREACHABLE = 3


def _fail(message: str, code: int = EXIT_FAILED) -> NoReturn:
    fail(message, code)


def _run(work: Coroutine[Any, Any, T]) -> T:
    try:
        return asyncio.run(work)
    except (PropertyError, ListenerError) as error:
        _fail(str(error), ExitCode.USAGE)
    except (LinkError, OSError, TimeoutError) as error:
        _fail(f"cluster unreachable: {error or 'timed out'}", EXIT_UNREACHABLE)


@click.group()
def mirror() -> None:
    """Mirror topics of another Kafka-compatible cluster into this one, at the same offsets.

    \b
    Examples:
      bmq mirror run --name east --source east:9092 --target localhost:9092 --topic orders
      bmq mirror status -b localhost:9092 --source east:9092
      bmq mirror promote orders -b localhost:9092
    """


@mirror.command()
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="TOML file with a [mirror] table (flags take precedence).")
@click.option("--name", help="The source's name; marks the mirrored topics (bmq.mirror.source).")
@click.option("--source", help="The source cluster's bootstrap servers, HOST:PORT[,...].")
@click.option("--target", help="The target cluster's bootstrap servers [the config's].")
@click.option("--topic", "topics", multiple=True, help="A topic to mirror (repeatable).")
@click.option("--topic-regex", "topics_regex", help="Mirror the topics whose whole name matches.")
@click.option("--group", "groups", multiple=True,
              help="A consumer group whose committed offsets are copied (repeatable).")
@click.option("--group-regex", "groups_regex", help="Copy the offsets of matching groups.")
@click.option("--source-property", "source_properties", multiple=True, metavar="KEY=VALUE",
              help="librdkafka-style property for the source (security.protocol, sasl.*, ssl.*).")
@click.option("--target-property", "target_properties", multiple=True, metavar="KEY=VALUE",
              help="librdkafka-style property for the target.")
@click.option("--metrics-port", type=int, help="Serve Prometheus metrics at /metrics [0: off].")
@click.option("--log-level", help="DEBUG, INFO, WARNING or ERROR [INFO].")
def run(config_file: str | None, source_properties: tuple[str, ...],
        target_properties: tuple[str, ...], **flags: Any) -> None:
    """Copy the selected topics and group offsets until stopped (SIGTERM, Ctrl-C)."""
    from bmq.lifecycle import run_until_signalled

    overrides = dict(flags)
    if source_properties:
        overrides["source_properties"] = key_values_or_exit(source_properties, "--source-property")
    if target_properties:
        overrides["target_properties"] = key_values_or_exit(target_properties, "--target-property")
    try:
        settings = load_settings(config_file, overrides)
        setup_logging(settings.log_level)
        role = Mirror(settings)
    except (SettingsError, PropertyError, ListenerError, ValueError) as error:
        _fail(str(error), ExitCode.USAGE)
    run_until_signalled(role)


def _connection(func: Any) -> Any:
    for option in reversed([
        click.option("-b", "--bootstrap-server", "bootstrap", default="localhost:9092",
                     show_default=True, help="The target cluster (where the mirrors are)."),
        click.option("-X", "properties", multiple=True, metavar="KEY=VALUE",
                     help="librdkafka-style property for the target."),
    ]):
        func = option(func)
    return func


@mirror.command()
@_connection
@click.option("--source", help="The source's bootstrap servers: adds its end offsets and lag.")
@click.option("--source-property", "source_properties", multiple=True, metavar="KEY=VALUE",
              help="librdkafka-style property for the source.")
@click.option("--name", help="Only the mirrors of this source name.")
@click.option("--metrics", "metrics_urls", multiple=True, metavar="URL",
              help="A mirror process's metrics (http://HOST:PORT/metrics, repeatable): adds "
                   "the bytes they mirrored since they started, and whether a partition is "
                   "failing (its mirror's log says why).")
def status(bootstrap: str, properties: tuple[str, ...], source: str | None,
           source_properties: tuple[str, ...], name: str | None,
           metrics_urls: tuple[str, ...]) -> None:
    """Each mirrored partition: the target's and the source's end offsets, the lag in records
    and seconds, the bytes mirrored and whether it is failing."""
    async def work() -> list[Any]:
        target = Cluster(bootstrap, key_values_or_exit(properties, "-X"), CLIENT_ID)
        origin = None if source is None else Cluster(
            source, key_values_or_exit(source_properties, "--source-property"), CLIENT_ID)
        try:
            return await mirror_status(target, origin, name, metrics_urls)
        finally:
            target.close()
            if origin is not None:
                origin.close()

    rows = _run(work())
    click.echo(f"{'TOPIC':<24} {'PART':>4} {'SOURCE':<12} {'TARGET END':>12} "
               f"{'SOURCE END':>12} {'LAG':>10} {'LAG S':>8} {'BYTES':>14} STATE")
    for row in rows:
        state = "-" if row.failing is None else "failing" if row.failing else "ok"
        click.echo(f"{row.topic:<24} {row.partition:>4} {row.source_name:<12} "
                   f"{_shown(row.target_end):>12} {_shown(row.source_end):>12} "
                   f"{_shown(row.lag_records):>10} "
                   f"{'-' if row.lag_seconds is None else f'{row.lag_seconds:.1f}':>8} "
                   f"{_shown(row.bytes_mirrored):>14} {state}")


def _shown(value: int | None) -> str:
    return "-" if value is None else str(value)


@mirror.command()
@_connection
@click.argument("topics", nargs=-1, required=True)
def promote(bootstrap: str, properties: tuple[str, ...], topics: tuple[str, ...]) -> None:
    """Stop mirroring TOPICS and make them writable (failover): their configs lose
    bmq.mirror.source; the mirror leaves them alone from then on."""
    async def work() -> dict[str, str]:
        target = Cluster(bootstrap, key_values_or_exit(properties, "-X"), CLIENT_ID)
        try:
            return await promote_topics(target, list(topics))
        finally:
            target.close()

    refused = _run(work())
    for topic in topics:
        if topic in refused:
            click.echo(f"{topic}: not promoted: {refused[topic]}", err=True)
        else:
            click.echo(f"{topic}: promoted, writable")
    if refused:
        sys.exit(EXIT_FAILED)
