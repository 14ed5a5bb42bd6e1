"""What every broker API handler receives."""

from __future__ import annotations

from dataclasses import dataclass

from bmq.broker.broker import Broker
from bmq.protocol.headers import RequestHeader
from bmq.security.session import ANONYMOUS, Session


@dataclass(frozen=True, slots=True)
class RequestContext:
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

    @property
    def principal(self) -> str:
        """Who sent the request, as Kafka names principals: ``User:alice`` (SASL),
        ``User:CN=alice,O=example`` (a client certificate) or ``User:ANONYMOUS``."""
        return ANONYMOUS if self.session is None else self.session.principal
