"""Share groups (KIP-932, "Queues for Kafka"): membership, share-partitions with their record
locks, delivery counts and retry back-off, their durable state on ``__share_group_state``, and
dead-letter topics (KIP-1191). See docs/share-groups.md."""

from bmq.coordinators.share.groups import GROUP_TYPE_SHARE, ShareGroups
from bmq.coordinators.share.partition_manager import (
    AckBatch,
    PartitionResult,
    SharePartitionManager,
)

__all__ = [
    "GROUP_TYPE_SHARE",
    "AckBatch",
    "PartitionResult",
    "ShareGroups",
    "SharePartitionManager",
]
