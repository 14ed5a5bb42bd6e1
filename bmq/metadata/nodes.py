"""The nodes a cluster has and clients connect to: brokers and proxies alike."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BrokerNode:
    """A node as Metadata names it: clients key their connections by ``node_id``."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
