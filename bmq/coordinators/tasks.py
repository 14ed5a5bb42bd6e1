"""The background work of a coordinator, started and stopped the same way by every one of them:
one-off tasks (a write nobody waits for, a transaction to finish), which stopping waits for
briefly, and periodic checks (expiry, time-outs, sweeps), which stopping cancels."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)

# How long stopping waits for one-off tasks still running.
STOP_WAIT_S = 10


class BackgroundTasks:
    """The tasks of one coordinator, named ``owner`` in the log."""

    def __init__(self, owner: str) -> None:
        self._owner = owner
        self._spawned: set[asyncio.Task[None]] = set()
        self._periodic: list[asyncio.Task[None]] = []

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` now, in the background; ``stop`` waits for it (briefly)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._spawned.add(task)
        task.add_done_callback(self._done)

    def every(self, interval_s: float, work: Callable[[], object]) -> None:
        """Call ``work`` (awaited if it returns an awaitable) every ``interval_s`` until
        ``stop``; a failure is logged and the next call comes on time."""
        self._periodic.append(asyncio.get_running_loop().create_task(
            self._every(interval_s, work)))

    async def stop(self) -> None:
        """Cancel the periodic work; wait up to STOP_WAIT_S for the one-off tasks."""
        for task in self._periodic:
            task.cancel()
        self._periodic.clear()
        if self._spawned:
            await asyncio.wait(list(self._spawned), timeout=STOP_WAIT_S)

    async def _every(self, interval_s: float, work: Callable[[], object]) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                done = work()
                if inspect.isawaitable(done):
                    await done
            except Exception:
                log.exception("%s: %s failed", self._owner, getattr(work, "__name__", work))

    def _done(self, task: asyncio.Task[None]) -> None:
        self._spawned.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: background task failed", self._owner, exc_info=task.exception())
