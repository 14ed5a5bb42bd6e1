"""The log cleaner as a broker runs it: one thread of its own (Kafka's ``log.cleaner.threads``
is 1 by default too) that looks at the compacted partitions this broker owns every
``log.cleaner.backoff.ms`` and cleans those due, one at a time. The thread keeps the event loop
free: parsing and filtering records runs in C without the GIL, and the log's locks are taken
only for the swap. The broker decides which logs it is given (not the internal logs whose
coordinators compact them with snapshots of their own, ``bmq.metadata.topics``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from bmq.cleaner.cleaner import CleanResult, LogCleaner
from bmq.protocol.errors import KafkaError
from bmq.storage.log import PartitionLog

log = logging.getLogger(__name__)

CLEANER_NICE = 10


def _lower_priority() -> None:
    """The cleaner's thread yields the CPU to the event loop and the writer (Linux: a thread
    has a nice value of its own)."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), CLEANER_NICE)


class CleanerService:
    def __init__(self, backoff_ms: int, buffer_bytes: int) -> None:
        self.backoff_ms = backoff_ms
        self._cleaner = LogCleaner(buffer_bytes)
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="bmq-cleaner",
                                          initializer=_lower_priority)

    async def run(self, logs: Callable[[], Iterable[PartitionLog]]) -> None:
        """Clean the due partitions of ``logs()`` every backoff, until cancelled."""
        loop = asyncio.get_running_loop()
        try:
            while True:
                await asyncio.sleep(self.backoff_ms / 1000)
                for partition_log in logs():
                    if partition_log.config.compact:
                        await loop.run_in_executor(self._thread, self.clean_one, partition_log)
        finally:
            self._thread.shutdown(wait=False, cancel_futures=True)

    def clean_one(self, partition_log: PartitionLog) -> CleanResult | None:
        """One pass over ``partition_log`` if due, then the replaced files that waited long
        enough are deleted; failures are logged (the log stays as it was)."""
        try:
            started = time.monotonic()
            result = self._cleaner.clean(partition_log, time.time_ns() // 1_000_000)
            if result is not None:
                log.info("cleaned %s: %d -> %d bytes, %d records and %d markers removed, "
                         "in %.2f s%s", partition_log, result.bytes_read, result.bytes_written,
                         result.records_removed, result.markers_removed,
                         time.monotonic() - started,
                         "" if result.swapped else " (log changed meanwhile: discarded)")
            partition_log.delete_replaced(partition_log.config.file_delete_delay_ms)
            return result
        except KafkaError as error:   # closed or fenced meanwhile: the next owner cleans
            log.info("cleaning %s stopped: %s", partition_log, error)
        except Exception:
            log.exception("cleaning %s failed", partition_log)
        return None
