"""`bmq broker`: the command of a cluster's broker role."""

from __future__ import annotations

import click

from bmq.role_options import common_options, parse_storage_options, role_config


@click.command()
@common_options
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
    from bmq.broker.cluster_server import run_broker

    config = role_config(config_file, {"zookeeper": zookeeper, "storage": storage,
                                   "zookeeper_session_timeout_ms": session_timeout_ms,
                                   "metrics_port": metrics_port, "log_level": log_level,
                                   "listen": listen,
                                   "advertise": advertise, "node_id": broker_id})
    run_broker(config, parse_storage_options(storage_options))
