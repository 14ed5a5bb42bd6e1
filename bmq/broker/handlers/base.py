"""What every broker API handler receives."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from bmq.broker.broker import Broker
from bmq.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from bmq.protocol.headers import RequestHeader
from bmq.security.authorizer import audit_denied
from bmq.security.context import DENIED, Authorizing
from bmq.security.session import Session

__all__ = ["DENIED", "RequestContext"]

@dataclass(frozen=True, slots=True)
class RequestContext(Authorizing):
    broker: Broker
    header: RequestHeader
    # The client's address as Kafka shows it in DescribeGroups ("/127.0.0.1").
    client_host: str
    # The request frame; record memoryviews in the decoded request point into it.
    frame: bytearray
    # The listener the client connected on: nodes are named by their address on it.
    listener: str
    # The connection's security: its principal and SASL state (None: a role without security).
    session: Session | None = None
    # Held by a produce from its start to its last append: the connection's batches are
    # appended in the order they came (None: a context of no connection).
    appends_in_order: asyncio.Lock | None = None

    def authorize_internal(self) -> bool:
        """Whether an inter-node API (BMQ's own, and transaction markers) may be served: only
        on the inter-broker listener, the one other nodes connect to, and only to principals
        that may CLUSTER_ACTION (other brokers, proxies), as Kafka guards its broker APIs."""
        if self.listener != self.broker.inter_broker_listener:
            session = self.session
            if session is not None:
                audit_denied(session.principal, session.client, self.listener,
                             self.header.api_key, ResourceType.CLUSTER, CLUSTER_NAME,
                             Operation.CLUSTER_ACTION)
            return False
        return self.authorize_cluster(Operation.CLUSTER_ACTION)
