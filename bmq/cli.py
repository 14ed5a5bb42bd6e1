"""The `bmq` command."""

from __future__ import annotations

import errno
import functools
import importlib
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click

from bmq.config import ConfigError, load_config
from bmq.logs import setup_logging
from bmq.startup import ExitCode, StartupError

# Subcommands defined elsewhere, imported only when they run (or `bmq --help` lists them): a
# role then does not pay for the client commands' imports (rich, ...) at start-up, nor a tool for
# the roles'.
_ELSEWHERE: dict[str, str] = {
    "topic": "bmq.commands.topic",
    "produce": "bmq.commands.produce",
    "consume": "bmq.commands.consume",
    "group": "bmq.commands.group",
    "cluster": "bmq.commands.cluster",
    "user": "bmq.commands.user",
    "acl": "bmq.commands.acl",
    "quota": "bmq.commands.quota",
    "txn": "bmq.commands.txn",
    "dlq": "bmq.commands.dlq",
    "index": "bmq.commands.index",
    "query": "bmq.commands.index",
    "controller": "bmq.controller.command",
    "broker": "bmq.broker.command",
    "admin": "bmq.controller.command",
    "proxy": "bmq.proxy.command",
    "local": "bmq.local.command",
    "mirror": "bmq.mirror.command",
    "databus": "bmq.databus.command",
    "console": "bmq.console.command",
}
# The server roles: how they fail to start is one line and an exit code (bmq.startup).
_ROLES = frozenset({"serve", "broker", "controller", "proxy", "local", "console"})


def _startup_error(error: Exception) -> StartupError | None:
    """What a role's start-up failure means, for failures raised by code that does not know it
    runs at start-up (asyncio's bind, kazoo's first connection)."""
    if isinstance(error, StartupError):
        return error
    if isinstance(error, OSError) and error.errno == errno.EADDRINUSE:
        return StartupError(f"cannot listen: {error.strerror}", ExitCode.ADDRESS_IN_USE)
    if "kazoo" in sys.modules:
        from kazoo.handlers.threading import KazooTimeoutError

        if isinstance(error, KazooTimeoutError):   # its text names the hosts and the wait
            return StartupError(str(error), ExitCode.ZOOKEEPER)
    return None


def _exit_on_startup_error(callback: Callable[..., Any]) -> Callable[..., Any]:
    """``callback`` (a role's command) printing a start-up failure as one line on stderr and
    exiting with its code, instead of a traceback."""
    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return callback(*args, **kwargs)
        except Exception as error:
            failure = _startup_error(error)
            if failure is None:
                raise
            _fail(failure)
    return run


def _fail(error: StartupError) -> NoReturn:
    click.echo(f"bmq: {error}", err=True)
    sys.exit(int(error.exit_code))


class _Commands(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *_ELSEWHERE})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in _ELSEWHERE:
            command = getattr(importlib.import_module(_ELSEWHERE[cmd_name]), cmd_name)
            if cmd_name in _ROLES and command.callback is not None:
                command.callback = _exit_on_startup_error(command.callback)
            self.add_command(command, cmd_name)
        return self.commands.get(cmd_name)


@click.group(cls=_Commands)
def main() -> None:
    """BMQ: a Kafka-compatible message queue whose brokers keep no state of their own.

    Roles run the servers (serve; controller and broker in cluster mode); the client tools
    (topic, produce, consume, group, cluster) work against any Kafka-compatible cluster.

    \b
    Examples:
      bmq serve --data-dir ./bmq-data --metrics-port 9100
      bmq topic create demo --partitions 3
      printf 'k1:hello\\n' | bmq produce demo --key-separator :
      bmq consume demo --from-beginning --exit-at-end --format '{key} {value}'
      bmq group describe my-group
    """


@main.command()
@_exit_on_startup_error
@click.option("--data-dir", help="Directory for segments and metadata [./bmq-data].")
@click.option("--listen", help="HOST:PORT to accept Kafka clients on [127.0.0.1:9092].")
@click.option("--advertise", help="HOST:PORT clients are told to connect to [the listen address].")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="TOML file with settings (flags and BMQ_* variables take precedence).")
@click.option("--metrics-port", type=int,
              help="Serve Prometheus metrics on this port at /metrics [0: off].")
@click.option("--console-listen", metavar="HOST:PORT",
              help="Serve the web console (bmq console) here [127.0.0.1:8080].")
@click.option("--no-console", is_flag=True, help="Do not start the web console.")
@click.option("--log-format", type=click.Choice(["text", "json"]),
              help="Log lines as text or as one JSON object each [text].")
@click.option("--log-level", help="DEBUG, INFO, WARNING or ERROR [INFO].")
def serve(data_dir: str | None, listen: str | None, advertise: str | None,
          config_file: str | None, metrics_port: int | None, console_listen: str | None,
          no_console: bool, log_format: str | None, log_level: str | None) -> None:
    """Run every role in one process on a local data directory.

    \b
    Examples:
      bmq serve --data-dir ./bmq-data --listen 127.0.0.1:9092
      bmq serve --config bmq.toml --metrics-port 9100 --log-format json
    """
    from bmq.broker.server import serve as run

    try:
        config = load_config(config_file, overrides={
            "data_dir": data_dir, "listen": listen, "advertise": advertise,
            "metrics_port": metrics_port, "log_format": log_format, "log_level": log_level,
            "console_listen": "" if no_console else console_listen})
    except ConfigError as error:
        raise StartupError(str(error), ExitCode.USAGE) from error
    try:
        setup_logging(config.log_level, config.log_format)
    except ValueError as error:
        raise StartupError(f"log_level: {error}", ExitCode.USAGE) from error
    from bmq.role_options import meet_open_files_limit

    meet_open_files_limit()
    run(config)
