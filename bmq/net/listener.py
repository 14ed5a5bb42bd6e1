"""A role's listening sockets, bound before the role creates anything.

Binding first means a port someone else uses stops the process before it has touched its data
directory or storage. The sockets are bound but not listening: clients cannot connect (and
believe the server ready) until the role serves them (``asyncio``'s ``create_server(sock=...)``
calls ``listen``).
"""

from __future__ import annotations

import errno
import socket

from bmq.startup import ExitCode, StartupError


def cannot_listen(host: str, port: int, error: OSError) -> StartupError:
    """The ``StartupError`` for a port that cannot be bound or listened on."""
    if error.errno == errno.EADDRINUSE:
        reason = "address already in use (another process listens there)"
    else:
        reason = error.strerror or str(error)
    return StartupError(f"cannot listen on {host}:{port}: {reason}", ExitCode.ADDRESS_IN_USE)


def bind_listeners(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to every address ``host`` resolves to (all interfaces for "" or
    "0.0.0.0"-style wildcards, as ``create_server`` does), or a ``StartupError``."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise StartupError(f"cannot listen on {host}:{port}: {error.strerror}",
                           ExitCode.USAGE) from error
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in infos:
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                # IPv4 gets a socket of its own, as asyncio's create_server does it
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except OSError as error:
        for sock in sockets:
            sock.close()
        raise cannot_listen(host, port, error) from error
    return sockets
