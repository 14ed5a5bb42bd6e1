"""How every server role runs: start, serve until SIGTERM or SIGINT, stop cleanly, exit 0; and
meanwhile give the memory glibc's allocator keeps after a burst back to the system."""

from __future__ import annotations

import asyncio
import ctypes
import gc
import logging
import signal
from typing import Protocol

from bmq import limits

log = logging.getLogger(__name__)

# glibc serves buffers up to some megabytes from its heaps once a larger one was freed (its
# mmap threshold rises), and gives a heap's free pages back only from its top: after a burst
# of produce requests (a scheduled topic copies them into the timer log) one long-lived
# allocation near the top kept up to 60 MB of free pages resident, so the broker's memory
# after scheduling 10,000,000 records was 88-201 MiB (1,000,000: 75-97). malloc_trim gives
# back free pages anywhere in the heaps. Fixing the threshold instead
# (MALLOC_MMAP_THRESHOLD_=131072) kept memory as flat but cost 28% of produce
# throughput when the broker is the bottleneck: every request frame mapped and faulted in anew.
TRIM_INTERVAL_S = 10.0
TRIM_FREE_BYTES = 16 << 20     # trim once this much is free in the heaps
# CPython's cyclic garbage collector scans its youngest objects after every 700 more container
# objects are made than freed (and older generations every 10 of those): a server making a
# few dozen per request, most of them alive until its answer (futures, records, batches),
# spent a fifth of the databus agent's CPU in it (measured with gc.callbacks at 30 x 100
# messages/s: 1.36 s of 6.6 s) and its pauses were in the latency's tail. Cycles are still
# collected, after this many more objects (a few MB at most).
GC_THRESHOLD = 20_000


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


class Role(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None:
        """Stop cleanly (brokers: drain, flush and checkpoint first)."""


def glibc_malloc() -> ctypes.CDLL | None:
    """glibc (2.33 or later), if this process runs on it."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = _MallInfo2
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError):
        return None
    return libc


def trim_free_heap(libc: ctypes.CDLL) -> None:
    """Give the heaps' free pages back if enough are free (ctypes drops the GIL meanwhile;
    the trim holds one arena's lock at a time, a few milliseconds)."""
    if libc.mallinfo2().fordblks >= TRIM_FREE_BYTES:
        libc.malloc_trim(0)


async def _return_free_heap(libc: ctypes.CDLL) -> None:
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(TRIM_INTERVAL_S)
        await loop.run_in_executor(None, trim_free_heap, libc)


async def _serve(role: Role) -> None:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    libc = glibc_malloc()
    trimming = None if libc is None else asyncio.create_task(_return_free_heap(libc))
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    await role.start()
    if limits.report():
        log.info("%s", limits.report())
    await stopping.wait()
    log.info("shutting down")
    if trimming is not None:
        trimming.cancel()
    await role.stop()


def run_until_signalled(role: Role) -> None:
    """Run ``role`` on uvloop until it is told to stop."""
    import uvloop

    uvloop.run(_serve(role))
