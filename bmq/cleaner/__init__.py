"""The log cleaner of compacted topics (``cleanup.policy=compact``): Kafka's cleaner over the
shared segments, run by each broker for the partitions it owns.

``cleaner``  one cleaning pass over a partition log (which segments, the offset map, the rewrite)
``service``  the background thread a broker runs it on
``_keymap``  the C part: the offset map and the record filter (``_keymap.c``, with the batch
             parsing and key hash of ``_batches.h``)
"""

from bmq.cleaner.cleaner import CleanResult, LogCleaner
from bmq.cleaner.service import CleanerService

__all__ = ["CleanResult", "CleanerService", "LogCleaner"]
