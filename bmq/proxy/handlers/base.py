"""What every proxy API handler receives."""

from __future__ import annotations

from dataclasses import dataclass

from bmq.net.client import LinkPool
from bmq.protocol.headers import RequestHeader
from bmq.proxy.proxy import Proxy
from bmq.security.context import Authorizing
from bmq.security.session import Session


@dataclass(frozen=True, slots=True)
class ProxyContext(Authorizing):
    proxy: Proxy
    # The client connection's own links to brokers, for the requests it forwards.
    links: LinkPool
    header: RequestHeader
    client_host: str
    # The request frame: relayed as is to a broker for the APIs the proxy does not answer.
    frame: bytearray
    # The listener the client connected on: nodes are named by their address on it.
    listener: str
    # The connection's security: its principal and SASL state; requests the proxy answers are
    # authorized here, those it forwards by the brokers (its links act for the principal).
    session: Session | None = None

    def address_of(self, node_id: int, host: str, port: int) -> tuple[str, int]:
        """Where this client reaches node ``node_id``, named ``host:port`` by a broker."""
        cluster = self.proxy.cluster
        node = cluster.brokers.get(node_id) or cluster.proxies.get(node_id)
        return node.address(self.listener) if node is not None else (host, port)
