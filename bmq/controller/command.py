"""The controller role's commands: `bmq controller` and `bmq admin` (reads the cluster's state
from ZooKeeper)."""

from __future__ import annotations

from typing import Any

import click

from bmq.role_options import common_options, role_config


@click.command()
@common_options
def controller(**common: Any) -> None:
    """Run a controller: places partitions on brokers and drives their states.

    Several may run; one is active (elected in ZooKeeper), the others stand by. Metrics
    (--metrics-port) bind the host of the `listen` setting, as for the other roles, and so
    does the brokers' liveness channel (an ephemeral port; the host brokers connect to is
    the `advertise` setting's, else the listen host, else this host's name). The channel
    speaks the security protocol of the inter-broker listener (`listeners`, e.g.
    SASL_SSL://0.0.0.0:0, the port unused) and checks brokers as that listener does.

    \b
    Example:
      bmq controller --zookeeper zk:2181 --storage hdfs://namenode:8020/bmq --metrics-port 9100
    """
    from bmq.controller.controller import run_controller
    from bmq.controller.liveness import channel_security

    config, storage_options = role_config(common, {})
    run_controller(config.zookeeper, config.zookeeper_root, config.zookeeper_session_timeout_ms,
                   config.storage, storage_options, config.metrics_port,
                   config.listen_host, config.advertised[0] if config.advertise else "",
                   channel_security(config))


@click.group()
def admin() -> None:
    """Inspect a cluster through ZooKeeper."""


@admin.command()
@click.option("--zookeeper", required=True, help="ZooKeeper HOST:PORT[,HOST:PORT...].")
@click.option("--root", default="/bmq", show_default=True, help="The cluster's ZooKeeper root.")
@click.option("--topic", help="Only this topic.")
def partitions(zookeeper: str, root: str, topic: str | None) -> None:
    """Show every partition's owner, leader epoch and state, and the brokers."""
    from bmq.metadata.zookeeper.layout import Paths, session
    from bmq.metadata.zookeeper.state import broker_list, drain_requests, partition_states

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
