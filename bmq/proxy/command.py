"""`bmq proxy`: the command of the proxy role."""

from __future__ import annotations

from typing import Any

import click

from bmq.role_options import common_options, listener_options, role_config


@click.command()
@common_options
@listener_options
@click.option("--cache-bytes", type=int,
              help="Record cache shared by all consumers of this proxy [268435456].")
def proxy(listen: str | None, advertise: str | None, cache_bytes: int | None, **common: Any
          ) -> None:
    """Run a proxy: serves consumers' fetches from shared storage, forwards produce requests
    to the owning brokers and relays everything else, so clients can bootstrap to proxies only.

    \b
    Example:
      bmq proxy --zookeeper zk:2181 --storage hdfs://namenode:8020/bmq \\
                --listen 0.0.0.0:9092 --advertise proxy1:9092 --cache-bytes 1073741824
    """
    from bmq.proxy.server import run_proxy

    config, storage_options = role_config(
        common, {"listen": listen, "advertise": advertise, "proxy_cache_bytes": cache_bytes})
    run_proxy(config, storage_options)
