"""Client-side commands of `bmq`: they speak the Kafka protocol (through confluent-kafka), so
they work against BMQ or any other Kafka-compatible cluster.

``COMMANDS`` is added to the `bmq` click group in ``bmq/cli.py``. The client library is imported
inside each command, so `bmq serve` and `bmq --help` do not pay for it.
"""

from __future__ import annotations

import click

from bmq.commands.acl import acl
from bmq.commands.cluster import cluster
from bmq.commands.consume import consume
from bmq.commands.dlq import dlq
from bmq.commands.group import group
from bmq.commands.index import index, query
from bmq.commands.produce import produce
from bmq.commands.quota import quota
from bmq.commands.topic import topic
from bmq.commands.txn import txn
from bmq.commands.user import user

COMMANDS: list[click.Command] = [topic, produce, consume, group, cluster, user, txn, acl,
                                  quota, dlq, index, query]

__all__ = ["COMMANDS"]
