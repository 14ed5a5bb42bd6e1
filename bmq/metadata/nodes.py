"""The nodes a cluster has and clients connect to: brokers and proxies alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Proxies are nodes in Metadata too (clients fetch from them); their ids start here, so any
# client of a BMQ cluster can tell them from brokers (bmq.proxy.cluster_view allocates them).
PROXY_ID_BASE = 100_000


def is_proxy(node_id: int) -> bool:
    return node_id >= PROXY_ID_BASE


@dataclass(frozen=True, slots=True)
class BrokerNode:
    """A node as Metadata names it: clients key their connections by ``node_id``.

    ``host``/``port`` is its inter-broker listener (how other nodes reach it); ``endpoints``
    holds (listener name, host, port) of every listener, so a client is told the address of the
    listener it connected on."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[tuple[str, str, int], ...] = ()

    def address(self, listener: str) -> tuple[str, int]:
        """Where a client of ``listener`` reaches this node (the inter-broker address if the
        node has no such listener, e.g. while nodes of a cluster are being reconfigured)."""
        for name, host, port in self.endpoints:
            if name == listener:
                return host, port
        return self.host, self.port

    def registration(self) -> dict[str, Any]:
        """The node's address fields as registered in ZooKeeper."""
        return {"host": self.host, "port": self.port,
                "endpoints": [list(endpoint) for endpoint in self.endpoints]}

    @classmethod
    def registered(cls, node_id: int, doc: dict[str, Any]) -> BrokerNode:
        """The node a ZooKeeper registration describes (older ones carry no endpoints)."""
        endpoints = tuple((str(name), str(host), int(port))
                          for name, host, port in doc.get("endpoints") or ())
        return cls(node_id, str(doc.get("host")), int(doc.get("port", -1)),
                   endpoints=endpoints)
