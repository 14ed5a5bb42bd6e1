"""Accepting connections on every listener of a role (see bmq/listeners.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from bmq.listeners import Listener


class Listening:
    """The servers of a role's listeners; each connection is made knowing its listener's name."""

    def __init__(self, listeners: Sequence[Listener]) -> None:
        self.listeners = list(listeners)
        self._servers: list[asyncio.Server] = []

    async def start(self, connection: Callable[[str], asyncio.BaseProtocol]) -> None:
        loop = asyncio.get_running_loop()
        try:
            for listener in self.listeners:
                self._servers.append(await loop.create_server(
                    lambda name=listener.name: connection(name),   # type: ignore[misc]
                    listener.host, listener.port, reuse_address=True, backlog=1024))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for server in self._servers:
            server.close()
        self._servers.clear()

    def describe(self) -> str:
        """For the start-up log line: ``NAME HOST:PORT (advertised HOST:PORT), ...``."""
        return ", ".join(f"{lst.name} {lst.host}:{lst.port} (advertised "
                         f"{lst.advertised_host}:{lst.advertised_port})"
                         for lst in self.listeners)
