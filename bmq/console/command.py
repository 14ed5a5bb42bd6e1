"""`bmq console`: serve the web console of a cluster."""

from __future__ import annotations

import signal
import socket
from types import FrameType

import click

from bmq.startup import ExitCode, StartupError

DEFAULT_LISTEN = "127.0.0.1:8080"


def _host_port(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise StartupError(f"--listen: expected HOST:PORT, got {listen!r}", ExitCode.USAGE)
    return host.strip("[]") or "127.0.0.1", int(port)


@click.command()
@click.option("-b", "--bootstrap-server", "bootstrap", default="localhost:9092",
              show_default=True, help="The cluster's bootstrap servers, HOST:PORT[,...].")
@click.option("--listen", default=DEFAULT_LISTEN, show_default=True,
              help="HOST:PORT the console's web server listens on.")
@click.option("-X", "--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="librdkafka property of its clients (security.protocol, sasl.*, ...).")
@click.option("--metrics", "metrics_urls", default="", metavar="URL[,URL...]",
              help="The brokers' HTTP ports (their --metrics-port), http://HOST:PORT: "
                   "throughput and latency charts, topic rates, Index Query.")
@click.option("--log-level", default="INFO", show_default=True,
              help="DEBUG, INFO, WARNING or ERROR.")
def console(bootstrap: str, listen: str, properties: tuple[str, ...], metrics_urls: str,
            log_level: str) -> None:
    """Serve a web console of a cluster: brokers and partition owners live, topics and their
    messages, consumer groups and their lag.

    \b
    Examples:
      bmq console -b localhost:9092 --listen 127.0.0.1:8080
      bmq console -b localhost:9092 --metrics http://localhost:9100
    """
    import uvicorn

    from bmq.console.admin import ClusterAdmin
    from bmq.console.app import make_app
    from bmq.role_options import parse_key_values

    host, port = _host_port(listen)
    config = parse_key_values(properties, "-X")
    # Bound here, not by uvicorn: a port in use is then the roles' one-line start-up failure
    # (bmq.cli, ExitCode.ADDRESS_IN_USE) rather than uvicorn's log lines about it.
    listener = socket.create_server((host, port))
    admin = ClusterAdmin(bootstrap, config, tuple(
        url.strip() for url in metrics_urls.split(",") if url.strip()))
    app = make_app(admin)
    click.echo(f"bmq console of {bootstrap} on http://{host}:{port}/", err=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level=log_level.lower(), access_log=False))
    # uvicorn stops gracefully on SIGINT or SIGTERM and then raises the signal again for the
    # handler it found: a stop asked for must end with exit code 0, as the other roles' do.
    signal.signal(signal.SIGTERM, _stop)
    try:
        server.run(sockets=[listener])
    except KeyboardInterrupt:
        pass
    finally:
        admin.close()
        listener.close()


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)
