"""`bmq databus`: run the agent, and map streams to topics."""

from __future__ import annotations

import asyncio
from typing import Any, NoReturn

import click

from bmq.client.login import PropertyError
from bmq.databus.settings import SettingsError, load_settings
from bmq.listeners import ListenerError
from bmq.metadata.databus_streams import (
    COMPRESSIONS,
    PARTITIONERS,
    MappingError,
    StreamMapping,
    check_stream_name,
    make_mapping,
)
from bmq.net.client import LinkError
from bmq.protocol.errors import KafkaError
from bmq.role_options import fail, key_values_or_exit
from bmq.startup import ExitCode

EXIT_FAILED = 1
EXIT_UNREACHABLE = 3


def _fail(message: str, code: int = EXIT_FAILED) -> NoReturn:
    fail(message, code)


@click.group()
def databus() -> None:
    """A per-host agent applications produce to: it batches their messages, spools them
    durably and forwards them to the cluster; streams are mapped to topics live.

    \b
    Examples:
      bmq databus run --cluster localhost:9092 --spool-dir ./databus-spool --listen 127.0.0.1:9094
      bmq databus map clicks --topic clicks-v2 -b localhost:9092
      bmq databus map clicks --topic clicks-v2 --zookeeper zk:2181
      bmq databus status --url http://127.0.0.1:9095
    """


@databus.command()
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="TOML file with a [databus] table (flags take precedence).")
@click.option("--cluster", help="The cluster's bootstrap servers, HOST:PORT[,...].")
@click.option("--spool-dir", help="Directory of the durable spool.")
@click.option("--listen", help="HOST:PORT of the Kafka port [127.0.0.1:9094].")
@click.option("--http-listen", help="HOST:PORT of the HTTP endpoint [none].")
@click.option("--unix-socket", help="Path of a Unix socket serving the HTTP endpoint [none].")
@click.option("--spool-bytes", type=int, help="The spool's bound [256 MiB].")
@click.option("--linger-ms", type=int, help="How long a batch waits for more messages [50].")
@click.option("--batch-bytes", type=int, help="A batch's size that sends it at once [1 MiB].")
@click.option("--compression", help="none, gzip, snappy, lz4 or zstd [lz4].")
@click.option("--cluster-property", "cluster_properties", multiple=True, metavar="KEY=VALUE",
              help="librdkafka-style property for the cluster (security.protocol, sasl.*).")
@click.option("--metrics-port", type=int,
              help="Serve Prometheus metrics (bmq_databus_*) on this port [0: off].")
@click.option("--workers", type=int,
              help="Processes serving the ports together, a spool each (one is one core) [1].")
@click.option("--log-level", help="DEBUG, INFO, WARNING or ERROR [INFO].")
def run(config_file: str | None, cluster_properties: tuple[str, ...], **flags: Any) -> None:
    """Serve applications and forward their messages until stopped (SIGTERM, Ctrl-C)."""
    from bmq.databus.agent import Databus
    from bmq.lifecycle import run_until_signalled
    from bmq.logs import setup_logging

    overrides = dict(flags)
    if cluster_properties:
        overrides["cluster_properties"] = key_values_or_exit(cluster_properties,
                                                             "--cluster-property")
    try:
        settings = load_settings(config_file, overrides)
        setup_logging(settings.log_level)
        role = Databus(settings)
    except (SettingsError, PropertyError, ListenerError, ValueError) as error:
        _fail(str(error), ExitCode.USAGE)
    from bmq.startup import StartupError

    try:
        run_until_signalled(role)
    except StartupError as error:
        _fail(str(error), error.exit_code)


@databus.command(name="map")
@click.argument("stream")
@click.option("--topic", help="The topic the stream's messages go to.")
@click.option("--partitioner", type=click.Choice(PARTITIONERS),
              help="key: by the key's murmur2 as Kafka's Java producer [default]; sticky: "
                   "keys ignored, each batch to one partition.")
@click.option("--compression", type=click.Choice(list(COMPRESSIONS)),
              help="The batches' compression [the agent's].")
@click.option("--linger-ms", type=int, help="[the agent's]")
@click.option("--batch-bytes", type=int, help="[the agent's]")
@click.option("--remove", is_flag=True, help="Remove the mapping: the stream goes to the "
                                             "topic of its own name.")
@click.option("-b", "--bootstrap-server", "bootstrap",
              help="The cluster, through any broker (or proxy) [localhost:9092].")
@click.option("-X", "properties", multiple=True, metavar="KEY=VALUE",
              help="librdkafka-style property for the cluster.")
@click.option("--zookeeper", metavar="HOST:PORT[,...][/CHROOT]",
              help="Instead of -b: store it in the cluster's ZooKeeper.")
@click.option("--root", default="/bmq", show_default=True, envvar="BMQ_ZOOKEEPER_ROOT",
              help="With --zookeeper: the cluster's root (or $BMQ_ZOOKEEPER_ROOT).")
def map_stream(stream: str, topic: str | None, remove: bool, bootstrap: str | None,
               properties: tuple[str, ...], zookeeper: str | None, root: str,
               **fields: Any) -> None:
    """Send STREAM's messages to --topic (with its partitioner, compression, batching); every
    agent of the cluster applies it within seconds."""
    if remove == bool(topic):
        _fail("give --topic TOPIC, or --remove", ExitCode.USAGE)
    if zookeeper and (bootstrap or properties):
        _fail("give -b HOST:PORT (and -X) or --zookeeper HOST:PORT, not both", ExitCode.USAGE)
    try:
        check_stream_name(stream)
        mapping = None if remove else make_mapping(
            topic=topic, **{k: v for k, v in fields.items() if v is not None})
    except MappingError as error:
        _fail(str(error), ExitCode.USAGE)
    if zookeeper:
        _store_in_zookeeper(zookeeper, root, stream, mapping)
    else:
        _store_through_a_broker(bootstrap or "localhost:9092", properties, stream, mapping)
    if mapping is None:
        click.echo(f"{stream}: mapping removed (goes to topic {stream})")
    else:
        click.echo(f"{stream} -> {mapping.topic}")


def _store_through_a_broker(bootstrap: str, properties: tuple[str, ...], stream: str,
                            mapping: StreamMapping | None) -> None:
    from bmq.databus.cluster import Cluster, MappingsNotServed

    async def work() -> None:
        cluster = Cluster(bootstrap, key_values_or_exit(properties, "-X"))
        try:
            await cluster.write_mapping(stream, mapping)
        finally:
            cluster.close()

    try:
        asyncio.run(work())
    except PropertyError as error:
        _fail(str(error), ExitCode.USAGE)
    except MappingsNotServed as error:
        _fail(str(error), ExitCode.USAGE)
    except KafkaError as error:
        _fail(f"mapping not stored: {error}")
    except (LinkError, OSError, TimeoutError) as error:
        _fail(f"cluster unreachable: {error or 'timed out'}", EXIT_UNREACHABLE)


def _store_in_zookeeper(hosts: str, root: str, stream: str,
                        mapping: StreamMapping | None) -> None:
    """Change the znode the brokers serve the mappings from (they watch it)."""
    from kazoo.handlers.threading import KazooTimeoutError

    from bmq.metadata.databus_streams import DatabusStreamStore
    from bmq.metadata.zookeeper.documents import ZkDocuments
    from bmq.metadata.zookeeper.layout import Paths, session

    try:
        with session(hosts) as zk:
            paths = Paths(root)
            if not zk.exists(paths.cluster_id):
                _fail(f"no BMQ cluster at {hosts} under root {root} (no {paths.cluster_id})",
                      ExitCode.USAGE)
            DatabusStreamStore(ZkDocuments(zk, paths)).change({stream: mapping})
    except ValueError as error:     # a malformed connect string
        _fail(f"--zookeeper: {error}", ExitCode.USAGE)
    except KazooTimeoutError as error:
        _fail(str(error), EXIT_UNREACHABLE)


@databus.command()
@click.option("--url", default="http://127.0.0.1:9095", show_default=True,
              help="The agent's HTTP endpoint (its http_listen).")
def status(url: str) -> None:
    """What an agent took, spooled, forwarded and dropped, and its spool's state."""
    import json
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url.rstrip("/") + "/status", timeout=10) as answer:
            doc = json.loads(answer.read())
    except (urllib.error.URLError, OSError, ValueError) as error:
        _fail(f"agent unreachable at {url}: {error}", EXIT_UNREACHABLE)
    failing = doc.get("cluster_failing")
    click.echo(f"cluster            {doc['cluster']} "
               f"({'failing: ' + failing if failing else 'taking batches'})")
    click.echo(f"spool              {doc['spool_bytes']} of {doc['spool_limit_bytes']} bytes, "
               f"{doc['waiting_batches']} batches waiting for the cluster")
    click.echo(f"reading            {'held: behind' if doc['reading_held'] else 'open'} "
               f"({doc['reading_held_s']:g} s held in all)")
    for way, count in sorted(doc["accepted"].items()):
        click.echo(f"accepted ({way}){'':<{max(0, 8 - len(way))}}{count} messages")
    for reason, count in sorted(doc["refused"].items()):
        click.echo(f"refused            {count} messages: {reason}")
    click.echo(f"spooled            {doc['spooled_records']} records in "
               f"{doc['spooled_batches']} batches")
    click.echo(f"forwarded          {doc['forwarded_records']} records in "
               f"{doc['forwarded_batches']} batches, {doc['produce_requests']} Produce requests")
    for reason, count in sorted(doc["dropped"].items()):
        click.echo(f"dropped            {count} records: {reason}")
    for stream, topic in doc["streams"].items():
        click.echo(f"stream             {stream} -> {topic}")
