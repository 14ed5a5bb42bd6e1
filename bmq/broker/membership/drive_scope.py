"""Which partitions a read of the cluster may have changed for this broker: those of the topics
whose assignment document changed since the last read (the follower keeps an unchanged
document's object, so that is an identity check), or all of them.

Why: every registration write in the cluster makes every broker read it again, and each read
looked at every partition the broker owns, holds or reported (``_settled`` for 20,000 of them
per read: a tenth to a quarter of a second on a loaded machine, many reads while a killed
broker's partitions are moved). All of them are still looked at after a new registration and
every ``FULL_SCAN_S``, so a partition left unsettled by a failure of its own is driven again
without waiting for its topic's document to change.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

FULL_SCAN_S = 5.0


class DriveScope:
    def __init__(self) -> None:
        self._docs: dict[str, object] = {}
        self._reg = -1
        self._full_at = -FULL_SCAN_S

    def topics(self, assignments: Mapping[str, object], reg: int) -> set[str] | None:
        """The topics to drive after a read that gave ``assignments`` (None: all of them)."""
        now = time.monotonic()
        changed: set[str] | None
        if reg != self._reg or now - self._full_at >= FULL_SCAN_S:
            changed = None
            self._full_at = now
        else:
            changed = {t for t, doc in assignments.items() if self._docs.get(t) is not doc}
            changed.update(t for t in self._docs if t not in assignments)
        self._docs = dict(assignments)
        self._reg = reg
        return changed
