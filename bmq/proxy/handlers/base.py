"""What every proxy API handler receives."""

from __future__ import annotations

from dataclasses import dataclass

from bmq.net.client import LinkPool
from bmq.protocol.headers import RequestHeader
from bmq.proxy.proxy import Proxy


@dataclass(frozen=True, slots=True)
class ProxyContext:
    proxy: Proxy
    # The client connection's own links to brokers, for the requests it forwards.
    links: LinkPool
    header: RequestHeader
    client_host: str
    # The request frame: relayed as is to a broker for the APIs the proxy does not answer.
    frame: bytearray
