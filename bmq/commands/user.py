"""`bmq user ...`: SCRAM users of a `bmq serve` data directory (with no broker running) or of a
cluster (in its ZooKeeper, brokers running or not).

As Kafka's ``kafka-storage format --add-scram``, the first (super) user is made before the
brokers start. A running `bmq serve` takes changes through AlterUserScramCredentials
(confluent-kafka's ``AdminClient.alter_user_scram_credentials``), so these commands refuse a
data directory in use; in a cluster every broker and proxy sees a change at once (a watch).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click

from bmq.commands.cluster import open_zookeeper, zookeeper_options
from bmq.commands.common import F, fail, say
from bmq.metadata.credentials import CredentialStore
from bmq.metadata.documents import StorageDocuments
from bmq.metadata.zookeeper.documents import ZkDocuments
from bmq.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    make_credential,
)
from bmq.startup import StartupError
from bmq.storage import open_storage
from bmq.storage.data_dir import lock_data_dir

_MECHANISM = click.option("--mechanism", type=click.Choice(list(MECHANISMS)), multiple=True,
                          default=["SCRAM-SHA-512"], show_default=True,
                          help="SCRAM mechanism (repeatable).")


def _where(command: F) -> F:
    """--data-dir (`bmq serve`) or --zookeeper and --root (a cluster)."""
    command = zookeeper_options(required=False)(command)
    return click.option("--data-dir", type=click.Path(file_okay=False),
                        help="The data directory of `bmq serve` (no broker running on it)."
                        )(command)


@contextmanager
def _store(data_dir: str | None, zookeeper: str | None, root: str) -> Iterator[CredentialStore]:
    if (data_dir is None) == (zookeeper is None):
        raise click.UsageError("give --data-dir (bmq serve) or --zookeeper (a cluster)")
    if zookeeper is not None:
        with open_zookeeper(zookeeper, root) as (zk, paths):
            yield CredentialStore(ZkDocuments(zk, paths)).load()
        return
    assert data_dir is not None
    try:
        lock = lock_data_dir(data_dir)
    except StartupError as error:
        fail(f"{error}: stop the broker, or change users through it "
             f"(AlterUserScramCredentials)")
    try:
        meta = os.path.join(os.path.abspath(data_dir), "meta")
        os.makedirs(meta, exist_ok=True)
        yield CredentialStore(StorageDocuments(open_storage(meta))).load()
    finally:
        lock.release()


@click.group()
def user() -> None:
    """SCRAM users of a `bmq serve` data directory or of a cluster (SASL listeners).

    \b
    Examples:
      echo -n secret | bmq user add alice --password-stdin --data-dir ./bmq-data
      echo -n secret | bmq user add admin --password-stdin --zookeeper zk:2181
      bmq user list --data-dir ./bmq-data
      bmq user delete alice --data-dir ./bmq-data
    """


@user.command()
@click.argument("name")
@_MECHANISM
@click.option("--password-stdin", is_flag=True, required=True,
              help="Read the password from standard input (one line).")
@click.option("--iterations", type=click.IntRange(MIN_ITERATIONS, MAX_ITERATIONS),
              default=DEFAULT_ITERATIONS, show_default=True, help="PBKDF2 iterations.")
@_where
def add(name: str, mechanism: tuple[str, ...], password_stdin: bool, iterations: int,
        data_dir: str | None, zookeeper: str | None, root: str) -> None:
    """Add user NAME (or replace its password); only salted keys are stored."""
    password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        fail("no password on standard input")
    with _store(data_dir, zookeeper, root) as store:
        store.alter([], [(name, make_credential(each, password, iterations))
                         for each in mechanism])
    say(f"user {name} has {', '.join(mechanism)} credentials in {data_dir or zookeeper}")


@user.command("list")
@_where
def list_(data_dir: str | None, zookeeper: str | None, root: str) -> None:
    """List users and their mechanisms."""
    with _store(data_dir, zookeeper, root) as store:
        for name in store.users():
            mechanisms = ", ".join(f"{c.mechanism} (iterations {c.iterations})"
                                   for c in store.of_user(name))
            click.echo(f"{name}\t{mechanisms}")


@user.command()
@click.argument("name")
@_MECHANISM
@_where
def delete(name: str, mechanism: tuple[str, ...], data_dir: str | None, zookeeper: str | None,
           root: str) -> None:
    """Delete user NAME's credentials of the given mechanisms."""
    with _store(data_dir, zookeeper, root) as store:
        deleted = [each for _, each in store.alter([(name, each) for each in mechanism], [])]
    if not deleted:
        fail(f"user {name} has no {', '.join(mechanism)} credentials")
    say(f"deleted {', '.join(deleted)} credentials of user {name}")
