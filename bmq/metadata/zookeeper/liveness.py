"""The liveness channel's wire format, shared by the controller (``bmq.controller.liveness``)
and the brokers (``bmq.broker.membership.channel``).

The active controller publishes its channel's ``HOST:PORT`` as ``channel`` in ``/controller``.
A broker connects and sends one line, the controller answers one line, then nothing is sent
until one side closes::

    broker -> controller   {"broker": <id>, "reg": <czxid of its registration>}
    controller -> broker   {"ok": true}     the registration is current: the channel is open
                           {"ok": false}    that registration is gone: register again
                           (closed)         not the active controller (any more)
                           {"error": <Kafka error code>, "message": "..."}, then closed:
                                            the peer is not admitted (not authenticated, or
                                            not allowed CLUSTER_ACTION)

When the inter-broker listener is secured, the channel is too (``bmq.controller.liveness``):
on SSL and SASL_SSL everything above is inside TLS, and on SASL_* the hello comes after
Kafka's SASL exchange, its SaslHandshake and SaslAuthenticate requests as lines (bytes in
base64)::

    broker -> controller   {"mechanism": "SCRAM-SHA-512"}
    controller -> broker   {"error": <code>, "mechanisms": [enabled mechanisms]}
    broker -> controller   {"auth": "<client message>"}                 once per step of the
    controller -> broker   {"error": <code>, "message": ..., "auth": "<server message>"}
                                            mechanism; a non-zero error closes the channel
"""

from __future__ import annotations

import json
import socket
from typing import Any

# A machine that vanishes (power loss, a cut cable) sends no FIN: TCP keepalive finds out
# in about idle + interval * count seconds. A frozen process's kernel still answers probes.
KEEPALIVE = {"TCP_KEEPIDLE": 2, "TCP_KEEPINTVL": 1, "TCP_KEEPCNT": 3}


def set_keepalive(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in KEEPALIVE.items():
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


def no_delay(sock: socket.socket) -> None:
    """Lines go out at once. After a TLS handshake the controller writes its session tickets
    and then its first answer: Nagle's algorithm held the answer until the broker's delayed
    ACK, 40 ms (measured: a SASL_SSL channel opened in 51-77 ms, 10-25 ms without Nagle), and
    a broker suspended by a controller failover acknowledges nothing until its channel opens."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def send_line(sock: socket.socket, doc: dict[str, Any]) -> None:
    sock.sendall(json.dumps(doc).encode() + b"\n")


def read_line(sock: socket.socket, limit: int = 1024) -> Any:
    """One JSON line, read byte-wise (nothing may be left in a buffer: the socket is then
    only watched for its end); None if the peer closed first."""
    line = bytearray()
    while len(line) < limit:
        byte = sock.recv(1)
        if not byte:
            return None
        if byte == b"\n":
            return json.loads(line)
        line += byte
    raise ValueError("liveness channel line too long")
