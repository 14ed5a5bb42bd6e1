"""`bmq proxy`: the command of the proxy role."""

from __future__ import annotations

import click

from bmq.role_options import common_options, parse_storage_options, role_config


@click.command()
@common_options
@click.option("--listen", help="HOST:PORT to accept Kafka clients on [127.0.0.1:9092].")
@click.option("--advertise", help="HOST:PORT clients are told to connect to [the listen address].")
@click.option("--cache-bytes", type=int,
              help="Record cache shared by all consumers of this proxy [268435456].")
def proxy(zookeeper: str | None, storage: str | None, storage_options: tuple[str, ...],
          session_timeout_ms: int | None, config_file: str | None, metrics_port: int | None,
          log_level: str | None, listen: str | None, advertise: str | None,
          cache_bytes: int | None) -> None:
    """Run a proxy: serves consumers' fetches from shared storage, forwards produce requests
    to the owning brokers and relays everything else, so clients can bootstrap to proxies only.

    \b
    Example:
      bmq proxy --zookeeper zk:2181 --storage hdfs://namenode:8020/bmq \\
                --listen 0.0.0.0:9092 --advertise proxy1:9092 --cache-bytes 1073741824
    """
    from bmq.proxy.server import run_proxy

    config = role_config(config_file, {"zookeeper": zookeeper, "storage": storage,
                                   "zookeeper_session_timeout_ms": session_timeout_ms,
                                   "metrics_port": metrics_port, "log_level": log_level,
                                   "listen": listen, "advertise": advertise,
                                   "proxy_cache_bytes": cache_bytes})
    run_proxy(config, parse_storage_options(storage_options))
