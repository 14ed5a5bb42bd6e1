"""Accepting connections on every listener of a role (see bmq/listeners.py).

The sockets are bound before the role creates anything (``bind``), so a port someone else uses
stops the process before it has touched its data directory or storage; they are bound but not
listening, so clients cannot connect (and believe the server ready) until the role serves them
(``start``: asyncio's ``create_server(sock=...)`` calls ``listen``). Each connection is made
knowing the name of its listener.

SSL and SASL_SSL listeners speak TLS with the server context the role gives for them; a role
that cannot serve a listener's security protocol (no context, or no SASL) refuses to start.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
from collections.abc import Callable, Mapping, Sequence

from bmq.listeners import Listener
from bmq.startup import ExitCode, StartupError

# A client that connects to a TLS port and never completes the handshake is dropped after this.
TLS_HANDSHAKE_TIMEOUT_S = 10.0


class Listening:
    """The sockets and servers of a role's listeners."""

    def __init__(self, listeners: Sequence[Listener],
                 tls: Mapping[str, ssl.SSLContext] | None = None, sasl: bool = False) -> None:
        """``tls``: the server context of each TLS listener; ``sasl``: the role authenticates
        SASL clients."""
        self.listeners = list(listeners)
        self._tls = dict(tls or {})
        self._sasl = sasl
        self._sockets: list[tuple[Listener, list[socket.socket]]] = []
        self._servers: list[asyncio.Server] = []

    def bind(self) -> None:
        """Bind every listener's address, or raise a ``StartupError`` (closing what was bound)."""
        for listener in self.listeners:
            if (listener.tls and listener.name not in self._tls) or (
                    listener.sasl and not self._sasl):
                raise StartupError(f"listener {listener.name}: this role does not serve "
                                   f"{listener.protocol} listeners yet", ExitCode.USAGE)
        try:
            for listener in self.listeners:
                self._sockets.append((listener, bind_listeners(listener.host, listener.port)))
        except StartupError:
            self.close()
            raise

    async def start(self, connection: Callable[[str], asyncio.BaseProtocol]) -> None:
        """Serve every listener ``bind`` bound."""
        loop = asyncio.get_running_loop()
        for listener, sockets in self._sockets:
            for sock in sockets:
                try:
                    self._servers.append(await loop.create_server(
                        lambda name=listener.name: connection(name),
                        sock=sock, backlog=1024, ssl=self._tls.get(listener.name),
                        ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S
                        if listener.name in self._tls else None))
                except OSError as error:   # another process bound the port too, listens first
                    self.close()
                    raise cannot_listen(listener.host, listener.port, error) from error

    def close(self) -> None:
        for server in self._servers:
            server.close()
        self._servers.clear()
        for _, sockets in self._sockets:
            for sock in sockets:
                sock.close()
        self._sockets.clear()

    def describe(self) -> str:
        """For the start-up log line: ``NAME HOST:PORT (advertised HOST:PORT), ...``."""
        return ", ".join(f"{lst.name}{'' if lst.name == lst.protocol else ' ' + lst.protocol} "
                         f"{lst.host}:{lst.port} (advertised "
                         f"{lst.advertised_host}:{lst.advertised_port})"
                         for lst in self.listeners)


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
