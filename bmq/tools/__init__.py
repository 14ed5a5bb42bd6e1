"""Client-side commands of `bmq`: they speak the Kafka protocol (through confluent-kafka), so
they work against BMQ or any other Kafka-compatible cluster.

``COMMANDS`` is added to the `bmq` click group in ``bmq/cli.py``. The client library is imported
inside each command, so `bmq serve` and `bmq --help` do not pay for it.
"""

from __future__ import annotations

import click

from bmq.tools.acl import acl
from bmq.tools.cluster import cluster
from bmq.tools.consume import consume
from bmq.tools.dlq import dlq
from bmq.tools.group import group
from bmq.tools.index import index, query
from bmq.tools.produce import produce
from bmq.tools.quota import quota
from bmq.tools.topic import topic
from bmq.tools.txn import txn
from bmq.tools.user import user

COMMANDS: list[click.Command] = [topic, produce, consume, group, cluster, user, txn, acl,
                                  quota, dlq, index, query]

__all__ = ["COMMANDS"]
