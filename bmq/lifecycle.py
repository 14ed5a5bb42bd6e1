"""How every server role runs: start, serve until SIGTERM or SIGINT, stop cleanly, exit 0."""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Protocol

log = logging.getLogger(__name__)


class Role(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None:
        """Stop cleanly (brokers: drain, flush and checkpoint first)."""


async def _serve(role: Role) -> None:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    await role.start()
    await stopping.wait()
    log.info("shutting down")
    await role.stop()


def run_until_signalled(role: Role) -> None:
    """Run ``role`` on uvloop until it is told to stop."""
    import uvloop

    uvloop.run(_serve(role))
