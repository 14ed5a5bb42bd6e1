"""Consumer groups: the group coordinator, its state machine and the ``__consumer_offsets`` log
(the first coordinator of an internal log, ``bmq.coordinators.sharded``).

See docs/groups.md for the behaviour and settings.
"""

from bmq.coordinators.groups.coordinator import GroupCoordinator
from bmq.coordinators.groups.group import Group, GroupState, JoinResult, SyncResult
from bmq.coordinators.groups.join import JoinRequest
from bmq.coordinators.placement import java_string_hashcode, partition_for
from bmq.metadata.topics import OFFSETS_TOPIC

__all__ = [
    "OFFSETS_TOPIC",
    "Group",
    "GroupCoordinator",
    "GroupState",
    "JoinRequest",
    "JoinResult",
    "SyncResult",
    "java_string_hashcode",
    "partition_for",
]
