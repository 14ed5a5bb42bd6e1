"""The fence between owners of a partition: an owner whose leader epoch is below the newest
state file's epoch has been replaced and must stop writing."""

from __future__ import annotations

from bmq.protocol.errors import ErrorCode, KafkaError


class FencedEpochError(KafkaError):
    """FENCED_LEADER_EPOCH, with the highest epoch found on storage (``current_epoch``): a
    controller reassigns the partition above it."""

    def __init__(self, message: str, current_epoch: int) -> None:
        super().__init__(ErrorCode.FENCED_LEADER_EPOCH, message)
        self.current_epoch = current_epoch
