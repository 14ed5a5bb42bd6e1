"""`bmq user ...`: SCRAM users of a `bmq serve` data directory, with no broker running.

As Kafka's ``kafka-storage format --add-scram``, the first (super) user is made before the
broker starts; a running broker takes changes through AlterUserScramCredentials (confluent-kafka's
``AdminClient.alter_user_scram_credentials``), so these commands refuse a directory in use.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click

from bmq.metadata.credentials import CredentialStore
from bmq.metadata.documents import StorageDocuments
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
from bmq.tools.common import fail, say

_data_dir = click.option("--data-dir", required=True, type=click.Path(file_okay=False),
                         help="The data directory of `bmq serve` (no broker running on it).")
_mechanism = click.option("--mechanism", type=click.Choice(list(MECHANISMS)), multiple=True,
                          default=["SCRAM-SHA-512"], show_default=True,
                          help="SCRAM mechanism (repeatable).")


@contextmanager
def _store(data_dir: str) -> Iterator[CredentialStore]:
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
    """SCRAM users of a `bmq serve` data directory (SASL_PLAINTEXT / SASL_SSL listeners).

    \b
    Examples:
      echo -n secret | bmq user add alice --password-stdin --data-dir ./bmq-data
      bmq user list --data-dir ./bmq-data
      bmq user delete alice --data-dir ./bmq-data
    """


@user.command()
@click.argument("name")
@_mechanism
@click.option("--password-stdin", is_flag=True, required=True,
              help="Read the password from standard input (one line).")
@click.option("--iterations", type=click.IntRange(MIN_ITERATIONS, MAX_ITERATIONS),
              default=DEFAULT_ITERATIONS, show_default=True, help="PBKDF2 iterations.")
@_data_dir
def add(name: str, mechanism: tuple[str, ...], password_stdin: bool, iterations: int,
        data_dir: str) -> None:
    """Add user NAME (or replace its password); only salted keys are stored."""
    password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        fail("no password on standard input")
    with _store(data_dir) as store:
        store.alter([], [(name, make_credential(each, password, iterations))
                         for each in mechanism])
    say(f"user {name} has {', '.join(mechanism)} credentials in {data_dir}")


@user.command("list")
@_data_dir
def list_(data_dir: str) -> None:
    """List users and their mechanisms."""
    with _store(data_dir) as store:
        for name in store.users():
            mechanisms = ", ".join(f"{c.mechanism} (iterations {c.iterations})"
                                   for c in store.of_user(name))
            click.echo(f"{name}\t{mechanisms}")


@user.command()
@click.argument("name")
@_mechanism
@_data_dir
def delete(name: str, mechanism: tuple[str, ...], data_dir: str) -> None:
    """Delete user NAME's credentials of the given mechanisms."""
    with _store(data_dir) as store:
        deleted = [each for _, each in store.alter([(name, each) for each in mechanism], [])]
    if not deleted:
        fail(f"user {name} has no {', '.join(mechanism)} credentials")
    say(f"deleted {', '.join(deleted)} credentials of user {name}")
