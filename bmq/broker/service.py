"""The broker as its client connections see it (``bmq.net.connection.Service``)."""

from __future__ import annotations

import asyncio

from bmq import metrics
from bmq.broker.broker import Broker
from bmq.broker.handlers import TABLES, RequestContext
from bmq.listeners import Listener
from bmq.net.connection import KafkaConnection
from bmq.protocol.headers import RequestHeader
from bmq.security.session import Security, Session


class BrokerService:
    observe = staticmethod(metrics.observe_response)

    def __init__(self, broker: Broker, listener: str, session: Session) -> None:
        """``session``: the connection's security (its principal, SASL state)."""
        self.broker = broker
        self.handlers = TABLES.served(broker.config.legacy_clients_enable)
        self.listener = listener
        self.session = session
        self.max_frame_bytes = broker.config.socket_request_max_bytes
        self.max_inflight = broker.config.max_inflight_requests_per_connection
        self.request_memory = broker.request_memory
        self.appends_in_order = asyncio.Lock()      # see RequestContext

    def context(self, header: RequestHeader, client_host: str,
                frame: bytearray) -> RequestContext:
        return RequestContext(self.broker, header, client_host, frame, self.listener,
                              self.session, self.appends_in_order)

    def close(self) -> None:
        """A broker keeps nothing else per connection."""


def broker_connection(broker: Broker, security: Security, listeners: list[Listener],
                      name: str) -> KafkaConnection:
    """A new client connection on listener ``name``, with a security session of its own."""
    [listener] = [each for each in listeners if each.name == name]
    session = security.session(listener)
    return KafkaConnection(BrokerService(broker, name, session), session)
