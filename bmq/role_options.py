"""What the commands of the roles share: the cluster roles' (`bmq controller`, `bmq broker`,
`bmq proxy`) common options, storage options and loading their settings; every role's
KEY=VALUE flags and its one-line failure."""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

from bmq.config import Config, ConfigError, load_config
from bmq.limits import partition_files, raise_open_files_limit
from bmq.logs import setup_logging
from bmq.startup import ExitCode, StartupError
from bmq.storage.handles import OPEN_FILES

_STORAGE_HELP = "Shared storage: file:///dir, s3://bucket/prefix or hdfs://namenode:port/path."


def parse_key_values(pairs: tuple[str, ...], option: str) -> dict[str, str]:
    """The values of a repeatable KEY=VALUE flag ``option``; StartupError (usage) for one
    without a key or an ``=``."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise StartupError(f"{option} expects KEY=VALUE, got {pair!r}", ExitCode.USAGE)
        options[key] = value
    return options


def parse_storage_options(pairs: tuple[str, ...]) -> dict[str, str]:
    return parse_key_values(pairs, "--storage-option")


def fail(message: str, code: int) -> NoReturn:
    """A command's failure: ``bmq: message`` on stderr and exit ``code``."""
    click.echo(f"bmq: {message}", err=True)
    sys.exit(code)


def key_values_or_exit(pairs: tuple[str, ...], option: str) -> dict[str, str]:
    """``parse_key_values``, a bad pair failing the command (exit 2)."""
    try:
        return parse_key_values(pairs, option)
    except StartupError as error:
        fail(str(error), error.exit_code)


def meet_open_files_limit() -> None:
    """Before a server role opens anything: the soft limit of open files raised to the hard
    one (``bmq.limits``), the partitions' pool of handles sized from it."""
    OPEN_FILES.limit = partition_files(raise_open_files_limit())


def role_config(common: dict[str, Any], overrides: dict[str, object]
                ) -> tuple[Config, dict[str, str]]:
    """A cluster role's settings and storage options from the ``common_options`` it was given
    (``common``) and its own flags (``overrides``, by setting name)."""
    try:
        config = load_config(common["config_file"], overrides={
            "zookeeper": common["zookeeper"], "storage": common["storage"],
            "zookeeper_session_timeout_ms": common["session_timeout_ms"],
            "metrics_port": common["metrics_port"], "log_level": common["log_level"],
            **overrides})
        if not config.zookeeper:
            raise ConfigError("--zookeeper (or BMQ_ZOOKEEPER / zookeeper) is required")
        if not config.storage:
            raise ConfigError("--storage (or BMQ_STORAGE / storage) is required")
        setup_logging(config.log_level, config.log_format)
    except (ConfigError, ValueError) as error:
        # One line and exit 2 (the README's promise), not click's usage block.
        raise StartupError(str(error), ExitCode.USAGE) from error
    meet_open_files_limit()
    return config, parse_storage_options(common["storage_options"])


def listener_options(func: click.decorators.FC) -> click.decorators.FC:
    """``--listen`` and ``--advertise``, for the roles clients connect to."""
    for option in reversed([
        click.option("--listen", help="HOST:PORT to accept Kafka clients on [127.0.0.1:9092]."),
        click.option("--advertise",
                     help="HOST:PORT clients are told to connect to [the listen address]."),
    ]):
        func = option(func)
    return func


def common_options(func: click.decorators.FC) -> click.decorators.FC:
    """The options every cluster role takes; its command receives them as ``**common``."""
    for option in reversed([
        click.option("--zookeeper", help="ZooKeeper HOST:PORT[,HOST:PORT...]."),
        click.option("--storage", help=_STORAGE_HELP),
        click.option("--storage-option", "storage_options", multiple=True, metavar="KEY=VALUE",
                     help="Passed to the storage backend (repeatable), e.g. endpoint_url=..."),
        click.option("--session-timeout-ms", type=int,
                     help="ZooKeeper session timeout [6000]: how long a frozen or cut-off "
                          "broker keeps its partitions (a dead one loses them at once)."),
        click.option("--config", "config_file", type=click.Path(dir_okay=False),
                     help="TOML file with settings (flags and BMQ_* variables take precedence)."),
        click.option("--metrics-port", type=int,
                     help="Serve Prometheus metrics on this port at /metrics [0: off]."),
        click.option("--log-level", help="DEBUG, INFO, WARNING or ERROR [INFO]."),
    ]):
        func = option(func)
    return func
