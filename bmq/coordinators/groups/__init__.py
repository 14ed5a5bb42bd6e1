"""Consumer groups: the group coordinator, its state machine and the ``__consumer_offsets`` log.

See docs/groups.md for the behaviour and settings.
"""

from bmq.coordinators.groups.coordinator import GroupCoordinator, JoinRequest
from bmq.coordinators.groups.group import Group, GroupState, JoinResult, SyncResult
from bmq.coordinators.groups.placement import OFFSETS_TOPIC, java_string_hashcode, partition_for

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
