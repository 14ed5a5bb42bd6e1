"""`bmq local`: the command."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType

import click

from bmq.local.cluster import LocalCluster
from bmq.startup import ExitCode, StartupError


@click.command()
@click.option("--dir", "directory", default="./bmq-local", show_default=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="Storage, ZooKeeper's data and the logs; a second run continues the cluster.")
@click.option("--brokers", default=3, show_default=True, type=click.IntRange(1, 64),
              help="How many brokers.")
@click.option("--proxy/--no-proxy", default=False, show_default=True,
              help="Also run a proxy, on the port after the brokers'.")
@click.option("--port", default=9092, show_default=True, type=click.IntRange(1, 65535),
              help="The first broker's port on 127.0.0.1; the others follow it.")
@click.option("--zookeeper-port", default=2181, show_default=True,
              type=click.IntRange(1, 65535), help="ZooKeeper's port on 127.0.0.1.")
@click.option("--log-level", default="INFO", show_default=True,
              help="The processes' log level (their logs are in DIR/logs).")
def local(directory: Path, brokers: int, proxy: bool, port: int, zookeeper_port: int,
          log_level: str) -> None:
    """Run a cluster on this machine until Ctrl-C: ZooKeeper (Debian's zookeeper package),
    a controller, brokers and optionally a proxy, on file:// storage in DIR.

    \b
    Examples:
      bmq local                       # 3 brokers on 127.0.0.1:9092-9094
      bmq local --brokers 2 --proxy --dir /tmp/bmq-local
    """
    cluster = LocalCluster(directory, brokers, proxy, port, zookeeper_port, log_level)
    stopping = threading.Event()

    def stop(signum: int, _frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    click.echo(f"starting ZooKeeper, a controller, {brokers} broker(s)"
               f"{' and a proxy' if proxy else ''} in {cluster.directory} ...")
    cluster.start()
    bootstrap = ",".join(b.address for b in cluster.brokers)
    click.echo(f"ZooKeeper  127.0.0.1:{zookeeper_port}\nstorage    {cluster.storage}\n"
               f"logs       {cluster.logs}")
    for process in cluster.processes:
        pid = process.proc.pid if process.proc else 0
        click.echo(f"{process.name:<10} {process.address or '-':<16} pid {pid}")
    click.echo(f"bootstrap.servers={bootstrap}")
    if cluster.proxy is not None:
        click.echo(f"through the proxy: bootstrap.servers={cluster.proxy.address}")
    click.echo("ready; Ctrl-C stops them all", err=False)
    exited = cluster.watch(stopping)
    click.echo("stopping ...")
    cluster.stop()
    if exited is not None:
        raise StartupError(cluster.exited(exited), ExitCode.FAILED)
    click.echo("stopped")
