"""A partition's state documents, one per leader epoch: the checkpoints of the append layout
(``checkpoint.json``, ``checkpoint-{epoch:010d}.json``) and the manifests of the object layout
(``manifest/{epoch:010d}.json``). The document of the highest epoch is the truth; an owner writes
its own epoch's document, a new owner first writes its *claim* (see the takeover in
``append_layout`` and ``object_layout``).

Readers of every kind use this module: the owner recovering a partition, the read-only readers of
proxies and brokers (``reader``), and the Spark source.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from bmq.storage.base import Storage

logger = logging.getLogger(__name__)

CHECKPOINT_FILE = "checkpoint.json"
CHECKPOINT_VERSION = 1
CHECKPOINT_VERSION_EPOCHS = 2
MANIFEST_DIR = "manifest"
_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d{10})\.json$")
_MANIFEST_RE = re.compile(r"^(\d{10})\.json$")


class StateFiles:
    """The state documents of one partition, by epoch, in ``directory``."""

    def __init__(self, storage: Storage, directory: str) -> None:
        self.storage = storage
        self.directory = directory

    def name(self, epoch: int) -> str:
        raise NotImplementedError

    def epoch_of(self, name: str) -> int | None:
        """The epoch whose document ``name`` is, or None if it is not a state document."""
        raise NotImplementedError

    def path(self, epoch: int) -> str:
        return f"{self.directory}/{self.name(epoch)}"

    def epochs(self, listed: list[str] | None = None) -> list[int]:
        """Epochs that have a document, ascending (one listing, or the names ``listed`` of
        the directory's files, read just before)."""
        names = self.storage.list(self.directory) if listed is None else listed
        found = (self.epoch_of(n) for n in names)
        return sorted(e for e in found if e is not None)

    def read(self, epoch: int) -> dict[str, Any] | None:
        """The document of ``epoch``, checked for the fields recovery needs; None if it is
        missing or unreadable (logged)."""
        path = self.path(epoch)
        try:
            data = json.loads(self.storage.read_all(path))
            if data.get("version") not in (CHECKPOINT_VERSION, CHECKPOINT_VERSION_EPOCHS):
                raise ValueError(f"checkpoint version {data.get('version')}")
            for key in ("log_start_offset", "recovery_point", "segments", "producers"):
                if key not in data:
                    raise ValueError(f"checkpoint without {key}")
            data.setdefault("epoch", epoch)
            data.setdefault("data_epoch", epoch)
            return dict(data)
        except FileNotFoundError:
            return None
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            logger.warning("%s: unreadable checkpoint %s (%s)", self.directory, path, exc)
            return None

    def newest(self, listed: list[str] | None = None) -> tuple[int, dict[str, Any] | None]:
        """(highest epoch with a document or -1, the newest readable document)."""
        epochs = self.epochs(listed)
        top = epochs[-1] if epochs else -1
        for epoch in reversed(epochs):
            state = self.read(epoch)
            if state is not None:
                return top, state
            logger.warning("%s: falling back from the checkpoint of epoch %d", self.directory,
                           epoch)
        return top, None

    def write(self, epoch: int, data: bytes) -> None:
        self.storage.write_atomic(self.path(epoch), data)

    def delete(self, epoch: int) -> None:
        self.storage.delete(self.path(epoch))


class CheckpointFiles(StateFiles):
    """The append layout's checkpoints, beside the segments (epoch 0: ``checkpoint.json``)."""

    def name(self, epoch: int) -> str:
        return CHECKPOINT_FILE if epoch == 0 else f"checkpoint-{epoch:010d}.json"

    def epoch_of(self, name: str) -> int | None:
        if name == CHECKPOINT_FILE:
            return 0
        m = _CHECKPOINT_RE.match(name)
        return int(m[1]) if m else None


class ManifestFiles(StateFiles):
    """The object layout's manifests, in ``manifest/`` beside the objects."""

    def __init__(self, storage: Storage, partition_dir: str) -> None:
        super().__init__(storage, f"{partition_dir}/{MANIFEST_DIR}")

    def name(self, epoch: int) -> str:
        return f"{epoch:010d}.json"

    def epoch_of(self, name: str) -> int | None:
        m = _MANIFEST_RE.match(name)
        return int(m[1]) if m else None
