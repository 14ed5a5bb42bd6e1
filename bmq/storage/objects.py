"""The partition log on object stores (S3): work in progress."""

from __future__ import annotations

from bmq.storage.log import PartitionLog


class ObjectPartitionLog(PartitionLog):
    def _load(self) -> None:
        raise NotImplementedError(
            f"{self.storage!r} cannot append; the object-store log layout is not implemented")
