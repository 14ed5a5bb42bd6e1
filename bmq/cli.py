"""The `bmq` command."""

from __future__ import annotations

import logging
import sys

import click

from bmq.config import ConfigError, load_config


@click.group()
def main() -> None:
    """BMQ: a Kafka-compatible message queue whose brokers keep no state of their own."""


@main.command()
@click.option("--data-dir", help="Directory for segments and metadata [./bmq-data].")
@click.option("--listen", help="HOST:PORT to accept Kafka clients on [127.0.0.1:9092].")
@click.option("--advertise", help="HOST:PORT clients are told to connect to [the listen address].")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="TOML file with settings (flags and BMQ_* variables take precedence).")
def serve(data_dir: str | None, listen: str | None, advertise: str | None,
          config_file: str | None) -> None:
    """Run every role in one process on a local data directory.

    \b
    Example:
      bmq serve --data-dir ./bmq-data --listen 127.0.0.1:9092
    """
    from bmq.broker.server import serve as run

    try:
        config = load_config(config_file, overrides={
            "data_dir": data_dir, "listen": listen, "advertise": advertise})
    except ConfigError as error:
        raise click.UsageError(str(error)) from error
    logging.basicConfig(level=config.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run(config)
