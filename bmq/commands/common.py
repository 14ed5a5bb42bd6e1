"""What the client-side commands share: connection options, clients, output and exit codes.

Exit codes of every client command:

* 0: done;
* 1: the operation failed (an error from the broker, an unknown topic or group, a delivery that
  failed, a group that is not empty, ...);
* 2: bad usage (click's own code: unknown option, missing argument, bad value);
* 3: the cluster could not be reached within ``--timeout``.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

DEFAULT_BOOTSTRAP = "localhost:9092"
DEFAULT_TIMEOUT_S = 10.0

EXIT_FAILED = 1
EXIT_UNREACHABLE = 3

F = TypeVar("F", bound=Callable[..., Any])


class ToolError(click.ClickException):
    """A failed operation: printed as ``error: ...`` on stderr, exit code 1."""

    exit_code = EXIT_FAILED

    def show(self, file: Any = None) -> None:
        err_console().print(f"[bold red]error:[/] {escape(self.format_message())}",
                            highlight=False)


class UnreachableError(ToolError):
    """The cluster did not answer in time: exit code 3."""

    exit_code = EXIT_UNREACHABLE


def fail(message: str, code: int = EXIT_FAILED) -> NoReturn:
    raise UnreachableError(message) if code == EXIT_UNREACHABLE else ToolError(message)


def out_console() -> Console:
    # Not a terminal (a pipe, a file, a test): wide enough that tables never wrap.
    return Console(width=None if sys.stdout.isatty() else 250, highlight=False)


def err_console() -> Console:
    return Console(stderr=True, width=None if sys.stderr.isatty() else 250, highlight=False)


def parse_key_values(pairs: Iterable[str], what: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint=what)
        result[key] = value
    return result


@dataclass
class Connection:
    """The connection settings of one command, and the clients made from them."""

    bootstrap: str
    timeout: float
    properties: dict[str, str] = field(default_factory=dict)
    verbose: bool = False
    _admin: Any = None
    _metadata: Any = None

    def client_config(self, **extra: Any) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "client.id": "bmq-cli",
            # librdkafka prints connection failures itself; we report them once, as an error.
            "log_level": 7 if self.verbose else 0,
            "error_cb": self._on_error,
            "socket.connection.setup.timeout.ms": max(1000, int(self.timeout * 1000)),
        }
        conf.update(extra)
        conf.update(self.properties)
        return conf

    def _on_error(self, error: Any) -> None:
        if self.verbose:
            err_console().print(f"[yellow]client:[/] {error}")

    @property
    def timeout_ms(self) -> int:
        return max(1, int(self.timeout * 1000))

    def admin(self) -> Any:
        """An AdminClient, after checking the cluster answers (exit 3 if not)."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(self.client_config())
            self.metadata()
        return self._admin

    def metadata(self, refresh: bool = False) -> Any:
        """Cluster metadata (all topics, internal ones included), fetched once."""
        if self._metadata is None or refresh:
            from confluent_kafka import KafkaException

            try:
                self._metadata = self.admin().list_topics(timeout=self.timeout)
            except KafkaException as exc:
                fail(f"cannot reach the cluster at {self.bootstrap} within "
                     f"{self.timeout:g} s: {describe_error(exc)}", EXIT_UNREACHABLE)
        return self._metadata

    def topic_partitions(self, topic: str) -> list[int]:
        """The partition ids of ``topic``; exit 1 if it does not exist."""
        meta = self.metadata().topics.get(topic)
        if meta is None or (meta.error is not None and not meta.partitions):
            fail(f"unknown topic {topic!r}")
        return sorted(meta.partitions)

    def wait(self, future: Any, what: str) -> Any:
        """The result of an admin future, with broker errors turned into exit 1."""
        from confluent_kafka import KafkaException

        try:
            return future.result(timeout=self.timeout + 5)
        except KafkaException as exc:
            fail(f"{what}: {describe_error(exc)}")
        except TimeoutError:
            fail(f"{what}: no answer within {self.timeout:g} s", EXIT_UNREACHABLE)
        except ValueError as exc:
            fail(f"{what}: {exc}")


def describe_error(exc: BaseException) -> str:
    """``NAME: message`` for a KafkaException, else str(exc)."""
    error = exc.args[0] if exc.args else None
    name = getattr(error, "name", None)
    text = getattr(error, "str", None)
    if callable(name) and callable(text):
        return f"{name()}: {text()}" if text() else str(name())
    return str(exc)


def connection_options(command: F) -> F:
    """--bootstrap, --timeout, -X and --verbose; the command receives ``conn``."""

    @click.option("-b", "--bootstrap", default=DEFAULT_BOOTSTRAP, show_default=True,
                  envvar="BMQ_BOOTSTRAP", metavar="HOST:PORT[,...]",
                  help="Brokers to bootstrap from (or $BMQ_BOOTSTRAP).")
    @click.option("--timeout", default=DEFAULT_TIMEOUT_S, show_default=True, type=float,
                  metavar="SECONDS", help="Give up on an unreachable cluster after this long.")
    @click.option("-X", "--property", "properties", multiple=True, metavar="KEY=VALUE",
                  help="Extra librdkafka client setting (repeatable).")
    @click.option("-v", "--verbose", is_flag=True, help="Show the client library's log.")
    @functools.wraps(command)
    def wrapper(bootstrap: str, timeout: float, properties: Sequence[str], verbose: bool,
                **kwargs: Any) -> Any:
        if timeout <= 0:
            raise click.BadParameter("must be positive", param_hint="--timeout")
        conn = Connection(bootstrap, timeout, parse_key_values(properties, "-X"), verbose)
        return command(conn=conn, **kwargs)

    return wrapper  # type: ignore[return-value]


def output_option(command: F) -> F:
    return click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table",
                        show_default=True, help="Tables for people, JSON for scripts.")(command)


def print_json(doc: Any) -> None:
    click.echo(json.dumps(doc, indent=2, default=str))


def print_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]],
                right: Iterable[str] = ()) -> None:
    aligned = set(right)
    table = Table(title=title, title_justify="left", show_edge=False, box=None,
                  header_style="bold", pad_edge=False)
    for name in columns:
        table.add_column(name, justify="right" if name in aligned else "left", no_wrap=True)
    for row in rows:
        table.add_row(*("-" if cell is None else str(cell) for cell in row))
    out_console().print(table)


def say(text: str) -> None:
    """A status line on stderr (stdout stays for data)."""
    err_console().print(text, highlight=False, markup=False)


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun`` in agreement: "1 message", "2 messages", "0 brokers"."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
