"""A partition's log on shared storage: Kafka's segmented log, in the append layout (files) or
the object layout (objects and a manifest). See ``partition_log`` for the design. The modules
import one another one way, in this order (each only those above it):

``config``         LogConfig, AppendResult, shared helpers
``fencing``        FencedEpochError
``state``          the per-epoch state documents (checkpoints, manifests)
``scan``           recovery's check of a segment's batches (also what ``durable`` trusts)
``aborted_index``  the sealed chunks of the aborted-transaction index
``published_txns`` what an owner publishes of its transactions, as readers follow it
``segments``       LogSegments: the log over its segments (list, offsets, lock, handles)
``offset_index``   the offset and time indexes of segments (not Index Query's field indexes)
``reading``        reads and timestamp lookups over a LogSegments
``host``           LogHost: the interface of the partition log its parts are written against
``recovery``       the loader: claiming a partition, scanning what earlier owners left (it
                   returns what it recovered), garbage collection
``retention``      retention and DeleteRecords
``layout``         what differs by storage, in two layouts:
``append_writes``  the append layout's write path: a flush into segment files and indexes
``append_layout``  segment files that grow by appends, and checkpoints (files, HDFS)
``object_layout``  immutable objects listed by a manifest, merged when small (object stores)
``publication``    the owner's state documents: when one is due, built and written in order
``cleaning``       what the log cleaner (bmq.cleaner) reads, writes and swaps in
``reader``         LogReader, the read-only reader (reads without any writes)
``partition_log``  PartitionLog, the one writer of a partition, composed of the parts above
``durable``        the durable extent of a log as segments and byte ranges, for readers that
                   plan their own reads (Spark); other layouts through LogReader
"""

from bmq.storage.log.config import AppendResult, LogConfig
from bmq.storage.log.fencing import FencedEpochError
from bmq.storage.log.partition_log import PartitionLog
from bmq.storage.log.reader import LogReader

__all__ = ["AppendResult", "FencedEpochError", "LogConfig", "LogReader", "PartitionLog"]
