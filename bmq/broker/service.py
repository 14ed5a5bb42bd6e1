"""The broker as its client connections see it (``bmq.net.connection.Service``)."""

from __future__ import annotations

from bmq import metrics
from bmq.broker.broker import Broker
from bmq.broker.handlers import HANDLERS, RequestContext
from bmq.protocol.headers import RequestHeader
from bmq.security.session import Session


class BrokerService:
    handlers = HANDLERS
    observe = staticmethod(metrics.observe_response)

    def __init__(self, broker: Broker, listener: str, session: Session | None = None) -> None:
        """``session``: the connection's security (its principal, SASL state); None on a role
        without security, whose clients are all ``User:ANONYMOUS``."""
        self.broker = broker
        self.listener = listener
        self.session = session
        self.max_frame_bytes = broker.config.socket_request_max_bytes
        self.max_inflight = broker.config.max_inflight_requests_per_connection

    def context(self, header: RequestHeader, client_host: str,
                frame: bytearray) -> RequestContext:
        return RequestContext(self.broker, header, client_host, frame, self.listener,
                              self.session)

    def close(self) -> None:
        """A broker keeps nothing per connection."""
