"""`bmq console`: serve the web console of a cluster."""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from types import FrameType

import click

from bmq.listeners import ListenerError, split_host_port
from bmq.startup import ExitCode, StartupError

DEFAULT_LISTEN = "127.0.0.1:8080"
# `bmq serve`'s console yields the CPU to the broker (a nice(2) increment).
SERVE_CHILD_NICENESS = 10


def _host_port(listen: str) -> tuple[str, int]:
    try:
        host, port = split_host_port(listen)
    except ListenerError as error:
        raise StartupError(f"--listen: {error}", ExitCode.USAGE) from None
    return host or "127.0.0.1", port


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command()
@click.option("-b", "--bootstrap-server", "bootstrap", default="localhost:9092",
              show_default=True, help="The cluster's bootstrap servers, HOST:PORT[,...].")
@click.option("--listen", default=DEFAULT_LISTEN, show_default=True,
              help="HOST:PORT the console's web server listens on.")
@click.option("-X", "--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="librdkafka property of its clients (security.protocol, sasl.*, ...): "
                   "the console's own principal.")
@click.option("--metrics", "metrics_urls", default="", metavar="URL[,URL...]",
              help="The brokers' HTTP ports (their --metrics-port), http://HOST:PORT: "
                   "throughput and latency charts, topic rates, Index Query.")
@click.option("--scram-sign-in", "scram_mechanism", metavar="MECHANISM",
              help="Users of the cluster sign in with their SCRAM password (SCRAM-SHA-256 or "
                   "SCRAM-SHA-512); the console acts as them.")
@click.option("--scram-bootstrap", metavar="HOST:PORT[,...]",
              help="Where users of the cluster sign in, when not at -b (a SASL listener of "
                   "their own).")
@click.option("--users", "users_file", type=click.Path(dir_okay=False, path_type=Path),
              help="The console's own users (JSON, made with --add-user); they act as its "
                   "principal, viewers change nothing.")
@click.option("--add-user", metavar="NAME",
              help="Add NAME (or set its password and role) in --users, then exit; the "
                   "password is read from stdin or asked for.")
@click.option("--role", type=click.Choice(["admin", "viewer"]), default="viewer",
              show_default=True, help="The role --add-user gives.")
@click.option("--no-sign-in", is_flag=True,
              help="Listen on a non-loopback address without sign-in (anyone who reaches it "
                   "acts as the console's principal).")
@click.option("--tls-cert", type=click.Path(dir_okay=False),
              help="Serve HTTPS with this certificate chain (PEM); cookies get Secure.")
@click.option("--tls-key", type=click.Path(dir_okay=False),
              help="The private key of --tls-cert (PEM).")
@click.option("--listen-fd", type=int, hidden=True,
              help="Serve on this listening socket, inherited (`bmq serve` binds --listen).")
@click.option("--serve-child", is_flag=True, hidden=True,
              help="Run as `bmq serve`'s console: at a lower CPU priority than the broker, "
                   "and stopping when stdin (a pipe from serve) closes.")
@click.option("--log-level", default="INFO", show_default=True,
              help="DEBUG, INFO, WARNING or ERROR.")
def console(bootstrap: str, listen: str, properties: tuple[str, ...], metrics_urls: str,
            scram_mechanism: str | None, scram_bootstrap: str | None,
            users_file: Path | None, add_user: str | None, role: str, no_sign_in: bool,
            tls_cert: str | None, tls_key: str | None,
            listen_fd: int | None, serve_child: bool, log_level: str) -> None:
    """Serve a web console of a cluster: brokers and partition owners live, topics and their
    messages, consumer groups and their lag, ACLs, SCRAM users and quotas.

    Sign-in is required once --scram-sign-in or --users is given; without either the console
    is open and listens on loopback only (unless --no-sign-in).

    \b
    Examples:
      bmq console -b localhost:9092 --listen 127.0.0.1:8080
      bmq console -b localhost:9092 --metrics http://localhost:9100
      bmq console --users console-users.json --add-user ops --role admin
      bmq console -b broker:9093 -X security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-512 \\
        -X sasl.username=console -X sasl.password=... --scram-sign-in SCRAM-SHA-512 \\
        --listen 0.0.0.0:8443 --tls-cert console.pem --tls-key console.key
    """
    if add_user is not None:
        _add_user(users_file, add_user, role)
        return
    import uvicorn

    from bmq.console.admin import ClusterAdmin
    from bmq.console.app import make_app
    from bmq.console.auth import SignIn
    from bmq.role_options import parse_key_values

    host, port = _host_port(listen)
    config = parse_key_values(properties, "-X")
    if bool(tls_cert) != bool(tls_key):
        raise StartupError("--tls-cert and --tls-key go together", ExitCode.USAGE)
    for flag, path in (("--tls-cert", tls_cert), ("--tls-key", tls_key)):
        if path and not os.path.isfile(path):
            raise StartupError(f"{flag}: no file {path}", ExitCode.USAGE)
    metrics = tuple(url.strip() for url in metrics_urls.split(",") if url.strip())
    try:
        sign_in = SignIn(bootstrap, config, users_file, scram_mechanism, scram_bootstrap,
                         https=bool(tls_cert), metrics_urls=metrics)
    except ValueError as error:
        raise StartupError(str(error), ExitCode.USAGE) from error
    if not sign_in.required and not no_sign_in and not is_loopback(host):
        raise StartupError(f"--listen {listen}: a console without sign-in listens on loopback "
                           f"only; give --scram-sign-in or --users, or --no-sign-in",
                           ExitCode.USAGE)
    # Bound here, not by uvicorn: a port in use is then the roles' one-line start-up failure
    # (bmq.cli, ExitCode.ADDRESS_IN_USE) rather than uvicorn's log lines about it.
    listener = socket.create_server((host, port)) if listen_fd is None else \
        socket.socket(fileno=listen_fd)
    admin = ClusterAdmin(bootstrap, config, metrics)
    app = make_app(admin, sign_in=sign_in)
    scheme = "https" if tls_cert else "http"
    click.echo(f"bmq console of {bootstrap} on {scheme}://{host}:{port}/"
               f"{'' if sign_in.required else ' (no sign-in)'}", err=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level=log_level.lower(), access_log=False,
                                           ssl_certfile=tls_cert, ssl_keyfile=tls_key))
    # uvicorn stops gracefully on SIGINT or SIGTERM and then raises the signal again for the
    # handler it found: a stop asked for must end with exit code 0, as the other roles' do.
    signal.signal(signal.SIGTERM, _stop)
    if serve_child:
        os.nice(SERVE_CHILD_NICENESS)
        threading.Thread(target=_stop_at_end_of_stdin, daemon=True).start()
    try:
        server.run(sockets=[listener])
    except KeyboardInterrupt:
        pass
    finally:
        sign_in.close()
        admin.close()
        listener.close()


def _add_user(users_file: Path | None, name: str, role: str) -> None:
    from bmq.console.auth import add_user

    if users_file is None:
        raise StartupError("--add-user needs --users FILE", ExitCode.USAGE)
    if sys.stdin.isatty():
        password = click.prompt(f"password of {name}", hide_input=True,
                                confirmation_prompt=True, err=True)
    else:
        password = sys.stdin.readline().rstrip("\n")
    try:
        add_user(users_file, name, password, role)
    except ValueError as error:
        raise StartupError(str(error), ExitCode.USAGE) from error
    click.echo(f"{name} ({role}) saved in {users_file}", err=True)


def _stop_at_end_of_stdin() -> None:
    """The parent (`bmq serve`) holds our stdin's other end: it closes when the parent ends,
    however it ends (a kill -9 included), and so does this console."""
    # os.read on the descriptor, not sys.stdin: a daemon thread blocked in the buffered
    # reader holds its lock, and the interpreter's shutdown then aborts ("could not acquire
    # lock for <stdin> at interpreter shutdown").
    while os.read(sys.stdin.fileno(), 4096):
        pass
    os.kill(os.getpid(), signal.SIGTERM)


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)
