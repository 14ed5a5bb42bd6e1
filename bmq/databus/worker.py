"""One worker of an agent of several (bmq/databus/workers.py), as the first process starts
it: ``python -m bmq.databus.worker`` with its settings, index and inherited sockets in the
environment (``WORKER_ENV``); it says on a pipe once it serves."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys

from bmq.databus.agent import Databus
from bmq.databus.settings import DatabusSettings
from bmq.databus.workers import WORKER_ENV, AgentSockets
from bmq.lifecycle import run_until_signalled
from bmq.logs import setup_logging
from bmq.startup import StartupError

log = logging.getLogger(__name__)


class Serving:
    """A worker's agent that says on a pipe once it serves (``Workers.start`` waits)."""

    def __init__(self, agent: Databus, ready: int) -> None:
        self.agent = agent
        self.ready = ready

    async def start(self) -> None:
        await self.agent.start()
        with contextlib.suppress(BrokenPipeError):      # (a worker started again: no one
            os.write(self.ready, b"1")                   # waits for it)
        os.close(self.ready)

    async def stop(self) -> None:
        await self.agent.stop()


def main() -> None:
    spec = json.loads(os.environ.pop(WORKER_ENV))
    settings = DatabusSettings(**spec["settings"])
    setup_logging(settings.log_level)
    fds = spec["fds"]
    bound = AgentSockets(kafka=[socket.socket(fileno=fd) for fd in fds["kafka"]],
                         http=[socket.socket(fileno=fd) for fd in fds["http"]],
                         unix=socket.socket(fileno=fds["unix"]) if fds["unix"] >= 0 else None)
    try:
        run_until_signalled(Serving(Databus(settings, spec["worker"], bound), fds["ready"]))
    except StartupError as error:
        log.error("databus worker %d: %s", spec["worker"], error)
        sys.exit(error.exit_code)


if __name__ == "__main__":
    main()
