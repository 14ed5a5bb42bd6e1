"""`bmq broker`: the command of a cluster's broker role."""

from __future__ import annotations

from typing import Any

import click

from bmq.role_options import common_options, listener_options, role_config


@click.command()
@common_options
@listener_options
@click.option("--broker-id", type=int, help="This broker's id (unique in the cluster).")
def broker(listen: str | None, advertise: str | None, broker_id: int | None, **common: Any
           ) -> None:
    """Run a stateless broker of a cluster.

    \b
    Example:
      bmq broker --zookeeper zk:2181 --storage hdfs://namenode:8020/bmq \\
                 --listen 0.0.0.0:9092 --advertise broker1:9092 --broker-id 1
    """
    from bmq.broker.cluster_server import run_broker

    config, storage_options = role_config(
        common, {"listen": listen, "advertise": advertise, "node_id": broker_id})
    run_broker(config, storage_options)
