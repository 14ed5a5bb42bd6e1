"""A partition's log on shared storage: Kafka's segmented log, in the append layout (files) or
the object layout (objects and a manifest). See ``partition_log`` for the design.

``config``         LogConfig, AppendResult, shared helpers
``core``           the state every part shares; fencing; publishing the state document
``state``          the per-epoch state documents (checkpoints, manifests)
``fencing``        FencedEpochError
``scan``           recovery's check of a segment's batches (also what ``durable`` trusts)
``recovery``       claiming a partition, scanning what earlier owners left, garbage collection
``indexes``        offset and time indexes of segments
``reading``        reads and timestamp lookups
``retention``      retention and DeleteRecords
``cleaning``       what the log cleaner (bmq.cleaner) reads, writes and swaps in
``layout``         what differs by storage: ``append_layout``, ``object_layout``
``partition_log``  PartitionLog, the one writer of a partition
``view``           LogReader, the read-only view, over ReadOnlyLog (reads without any writes)
``durable``        the durable extent of a log as segments and byte ranges, for readers that
                   plan their own reads (Spark); other layouts through LogReader
"""

from bmq.storage.log.config import AppendResult, LogConfig
from bmq.storage.log.fencing import FencedEpochError
from bmq.storage.log.partition_log import PartitionLog
from bmq.storage.log.view import LogReader

__all__ = ["AppendResult", "FencedEpochError", "LogConfig", "LogReader", "PartitionLog"]
