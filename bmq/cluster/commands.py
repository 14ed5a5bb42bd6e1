"""The cluster-mode commands of the `bmq` CLI: `bmq controller`, `bmq broker`, `bmq admin`."""

from __future__ import annotations

import click

from bmq.config import BrokerConfig, ConfigError, load_config
from bmq.logs import setup_logging

_STORAGE_HELP = "Shared storage: file:///dir, s3://bucket/prefix or hdfs://namenode:port/path."


def _options(pairs: tuple[str, ...]) -> dict[str, str]:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.UsageError(f"--storage-option expects KEY=VALUE, got {pair!r}")
        options[key] = value
    return options


def _config(config_file: str | None, overrides: dict[str, object]) -> BrokerConfig:
    try:
        config = load_config(config_file, overrides=overrides)
        if not config.zookeeper:
            raise ConfigError("--zookeeper (or BMQ_ZOOKEEPER / zookeeper) is required")
        if not config.storage:
            raise ConfigError("--storage (or BMQ_STORAGE / storage) is required")
        setup_logging(config.log_level, config.log_format)
    except (ConfigError, ValueError) as error:
        raise click.UsageError(str(error)) from error
    return config


def _common(func: click.decorators.FC) -> click.decorators.FC:
    for option in reversed([
        click.option("--zookeeper", help="ZooKeeper HOST:PORT[,HOST:PORT...]."),
        click.option("--storage", help=_STORAGE_HELP),
        click.option("--storage-option", "storage_options", multiple=True, metavar="KEY=VALUE",
                     help="Passed to the storage backend (repeatable), e.g. endpoint_url=..."),
        click.option("--session-timeout-ms", type=int,
                     help="ZooKeeper session timeout [6000]; failover takes about this long."),
        click.option("--config", "config_file", type=click.Path(dir_okay=False),
                     help="TOML file with settings (flags and BMQ_* variables take precedence)."),
        click.option("--metrics-port", type=int,
                     help="Serve Prometheus metrics on this port at /metrics [0: off]."),
        click.option("--log-level", help="DEBUG, INFO, WARNING or ERROR [INFO]."),
    ]):
        func = option(func)
    return func


@click.command()
@_common
def controller(zookeeper: str | None, storage: str | None, storage_options: tuple[str, ...],
               session_timeout_ms: int | None, config_file: str | None,
               metrics_port: int | None, log_level: str | None) -> None:
    """Run a controller: places partitions on brokers and drives their states.

    Several may run; one is active (elected in ZooKeeper), the others stand by. Metrics
    (--metrics-port) bind the host of the `listen` setting, as for the other roles.

    \b
    Example:
      bmq controller --zookeeper zk:2181 --storage hdfs://namenode:8020/bmq --metrics-port 9100
    """
    from bmq.controller.controller import run_controller

    config = _config(config_file, {"zookeeper": zookeeper, "storage": storage,
                                   "zookeeper_session_timeout_ms": session_timeout_ms,
                                   "metrics_port": metrics_port, "log_level": log_level})
    run_controller(config.zookeeper, config.zookeeper_root, config.zookeeper_session_timeout_ms,
                   config.storage, _options(storage_options), config.metrics_port,
                   config.listen_host)


@click.command()
@_common
@click.option("--listen", help="HOST:PORT to accept Kafka clients on [127.0.0.1:9092].")
@click.option("--advertise", help="HOST:PORT clients are told to connect to [the listen address].")
@click.option("--broker-id", type=int, help="This broker's id (unique in the cluster).")
def broker(zookeeper: str | None, storage: str | None, storage_options: tuple[str, ...],
           session_timeout_ms: int | None, config_file: str | None, metrics_port: int | None,
           log_level: str | None, listen: str | None, advertise: str | None,
           broker_id: int | None) -> None:
    """Run a stateless broker of a cluster.

    \b
    Example:
      bmq broker --zookeeper zk:2181 --storage hdfs://namenode:8020/bmq \\
                 --listen 0.0.0.0:9092 --advertise broker1:9092 --broker-id 1
    """
    from bmq.cluster.server import run_broker

    config = _config(config_file, {"zookeeper": zookeeper, "storage": storage,
                                   "zookeeper_session_timeout_ms": session_timeout_ms,
                                   "metrics_port": metrics_port, "log_level": log_level,
                                   "listen": listen,
                                   "advertise": advertise, "node_id": broker_id})
    run_broker(config, _options(storage_options))


@click.group()
def admin() -> None:
    """Inspect a cluster through ZooKeeper."""


@admin.command()
@click.option("--zookeeper", required=True, help="ZooKeeper HOST:PORT[,HOST:PORT...].")
@click.option("--root", default="/bmq", show_default=True, help="The cluster's ZooKeeper root.")
@click.option("--topic", help="Only this topic.")
def partitions(zookeeper: str, root: str, topic: str | None) -> None:
    """Show every partition's owner, leader epoch and state, and the brokers."""
    from bmq.cluster.zk import Paths, session
    from bmq.controller.admin import broker_list, drain_requests, partition_states

    with session(zookeeper) as zk:
        paths = Paths(root)
        requested = drain_requests(zk, paths)
        for broker_id, host, port, draining in broker_list(zk, paths):
            flags = (" draining" if draining else "") + \
                (" drain-requested" if broker_id in requested else "")
            click.echo(f"broker {broker_id} {host}:{port}{flags}")
        click.echo(f"{'TOPIC':<40} {'PARTITION':>9} {'OWNER':>5} {'EPOCH':>5}  STATE")
        for state in partition_states(zk, paths):
            if topic is None or state.topic == topic:
                click.echo(f"{state.topic:<40} {state.partition:>9} {state.owner:>5} "
                           f"{state.epoch:>5}  {state.state}")


COMMANDS: list[click.Command] = [controller, broker, admin]
