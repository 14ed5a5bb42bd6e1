"""Share sessions (KIP-932): a member's ShareFetch session with this broker, its partitions
and its epoch. Epoch 0 opens one (replacing any), each later request carries the next epoch,
-1 closes it; a session unused for SESSION_IDLE_MS is forgotten (its consumer died without
closing it; what it held was released when it left the group or its locks expired)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bmq.coordinators.clock import steady_now_ms
from bmq.coordinators.share.partition import SharePartition
from bmq.coordinators.share.records import StateKey
from bmq.metadata.topics import TopicIdPartition
from bmq.protocol.errors import ErrorCode
from bmq.readpath.partition_view import PartitionView

SESSION_IDLE_MS = 300_000
MAX_EPOCH = 2**31 - 1



@dataclass(slots=True)
class Target:
    """A share-partition a session names, resolved (SharePartitionManager._target)."""

    key: StateKey
    view: PartitionView
    state: SharePartition


@dataclass(slots=True)
class ShareSession:
    used_ms: int
    next_epoch: int = 1
    partitions: list[TopicIdPartition] = field(default_factory=list)
    targets: dict[TopicIdPartition, Target] = field(default_factory=dict)
    rotation: int = 0      # where the next fetch starts, so every partition gets its turn


class ShareSessions:
    """The share sessions of this broker, by (group id, member id)."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def use(self, group_id: str, member_id: str, epoch: int
            ) -> tuple[ErrorCode, ShareSession | None]:
        """The session a request with ``epoch`` belongs to (opened at 0), or Kafka's error."""
        key = (group_id, member_id)
        if epoch == 0:
            session = self._sessions[key] = ShareSession(steady_now_ms())
            return ErrorCode.NONE, session
        found = self._sessions.get(key)
        if found is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        found.used_ms = steady_now_ms()
        if epoch == -1:
            return ErrorCode.NONE, found
        if epoch != found.next_epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        found.next_epoch = found.next_epoch % MAX_EPOCH + 1
        return ErrorCode.NONE, found

    def close(self, group_id: str, member_id: str) -> bool:
        """Forget the member's session; False if it had none."""
        return self._sessions.pop((group_id, member_id), None) is not None

    def forget_idle(self, now: int) -> None:
        for key, session in list(self._sessions.items()):
            if now - session.used_ms > SESSION_IDLE_MS:
                del self._sessions[key]
