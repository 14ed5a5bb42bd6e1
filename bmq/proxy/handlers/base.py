"""What every proxy API handler receives."""

from __future__ import annotations

from dataclasses import dataclass

from bmq.protocol.headers import RequestHeader
from bmq.proxy.proxy import Proxy


@dataclass(frozen=True, slots=True)
class ProxyContext:
    proxy: Proxy
    header: RequestHeader
    client_host: str
    # The request frame: relayed as is to a broker for the APIs the proxy does not answer.
    frame: bytearray
