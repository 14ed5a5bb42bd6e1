"""The Parquet job's output root and its commit record (``_bmq_manifest.json``), on any fsspec
file system: what is committed, and the repair every run starts with (roll committed renames
forward, delete files no commit references). ``parquet_export`` says how the two are used.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

MANIFEST = "_bmq_manifest.json"
MANIFEST_VERSION = 1


# ------------------------------------------------------------------------------ output files
class Output:
    """The output root on any fsspec filesystem; paths are relative and use ``/``."""

    def __init__(self, url: str) -> None:
        import fsspec.core
        from fsspec.implementations.local import LocalFileSystem

        self.url = url
        self.fs, self.root = fsspec.core.url_to_fs(url)
        self.local = isinstance(self.fs, LocalFileSystem)
        self.root = self.root.rstrip("/")

    def path(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def exists(self, rel: str) -> bool:
        return bool(self.fs.exists(self.path(rel)))

    def read(self, rel: str) -> bytes:
        with self.fs.open(self.path(rel), "rb") as fh:
            return bytes(fh.read())

    def open_write(self, rel: str) -> Any:
        parent = self.path(rel).rsplit("/", 1)[0]
        self.fs.makedirs(parent, exist_ok=True)
        return self.fs.open(self.path(rel), "wb")

    def sync(self, rel: str) -> None:
        if self.local:
            fd = os.open(self.path(rel), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def sync_dir(self, rel: str) -> None:
        if self.local:
            fd = os.open(self.path(rel) if rel else self.root, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def write_atomic(self, rel: str, data: bytes) -> None:
        tmp = f"{rel}.{uuid.uuid4().hex[:12]}.tmp"
        with self.open_write(tmp) as fh:
            fh.write(data)
        self.sync(tmp)
        self.rename(tmp, rel)

    def rename(self, src: str, dst: str) -> None:
        if self.local:
            os.replace(self.path(src), self.path(dst))
            self.sync_dir(dst.rsplit("/", 1)[0] if "/" in dst else "")
        else:
            self.fs.mv(self.path(src), self.path(dst))

    def delete(self, rel: str) -> None:
        if self.fs.exists(self.path(rel)):
            self.fs.rm(self.path(rel))

    def files(self) -> list[str]:
        if not self.fs.exists(self.root):
            return []
        prefix = self.root + "/"
        return sorted(p[len(prefix):] for p in self.fs.find(self.root) if p.startswith(prefix))


def _ours(rel: str) -> bool:
    """Files this job creates (anything else under the root is left alone)."""
    name = rel.rsplit("/", 1)[-1]
    if "/" not in rel:
        return name.startswith(MANIFEST + ".") and name.endswith(".tmp")
    if not rel.startswith("topic="):
        return False
    return (name.endswith(".tmp") and name.startswith((".part-", ".compacted-"))) or (
        name.endswith(".parquet") and name.startswith(("part-", "compacted-")))


# ------------------------------------------------------------------------------ manifest
@dataclass
class FileEntry:
    path: str          # final name, relative to the output root
    tmp: str           # where the task wrote it
    date: str
    rows: int
    first_offset: int
    last_offset: int
    bytes: int


@dataclass
class PartitionState:
    ranges: list[list[int]] = field(default_factory=list)   # converted [start, end), merged
    files: list[FileEntry] = field(default_factory=list)

    def add_range(self, start: int, end: int) -> None:
        merged: list[list[int]] = []
        for s, e in sorted([*self.ranges, [start, end]]):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        self.ranges = merged


@dataclass
class Manifest:
    mode: str = "append"
    commits: int = 0
    partitions: dict[str, PartitionState] = field(default_factory=dict)

    def state(self, topic: str, partition: int) -> PartitionState:
        return self.partitions.setdefault(f"{topic}/{partition}", PartitionState())

    def to_json(self) -> bytes:
        body = {"version": MANIFEST_VERSION, "mode": self.mode, "commits": self.commits,
                "updated_ms": int(time.time() * 1000),
                "partitions": {k: {"ranges": v.ranges, "files": [asdict(f) for f in v.files]}
                               for k, v in sorted(self.partitions.items())}}
        return json.dumps(body, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Manifest:
        body = json.loads(data)
        if body.get("version") != MANIFEST_VERSION:
            raise ValueError(f"manifest version {body.get('version')} not supported")
        return cls(mode=body["mode"], commits=int(body["commits"]), partitions={
            k: PartitionState([list(r) for r in v["ranges"]],
                              [FileEntry(**f) for f in v["files"]])
            for k, v in body["partitions"].items()})

    def referenced(self) -> set[str]:
        return {f.path for s in self.partitions.values() for f in s.files}


def load_manifest(out: Output) -> Manifest | None:
    if not out.exists(MANIFEST):
        return None
    return Manifest.from_json(out.read(MANIFEST))


def committed_files(output: str) -> list[str]:
    """Full paths of the committed Parquet files under ``output`` (what an exact reader should
    read; a directory listing can briefly hold replaced snapshots until the next run)."""
    out = Output(output)
    manifest = load_manifest(out)
    if manifest is None:
        return []
    return sorted(out.path(p) for p in manifest.referenced())


def recover(out: Output, log: Callable[[str], None]) -> Manifest | None:
    """Roll committed renames forward and delete files no commit references."""
    manifest = load_manifest(out)
    present = set(out.files())
    if manifest is not None:
        for state in manifest.partitions.values():
            for f in state.files:
                if f.path not in present:
                    if f.tmp in present:
                        out.rename(f.tmp, f.path)
                        present.discard(f.tmp)
                        present.add(f.path)
                        log(f"recovered committed file {f.path}")
                    else:
                        raise RuntimeError(
                            f"committed file {f.path} is missing from {out.url}; the output is "
                            f"damaged (delete it, or the manifest, to convert again)")
    referenced = manifest.referenced() if manifest is not None else set()
    stale = [rel for rel in present if _ours(rel) and rel not in referenced]
    for rel in stale:
        out.delete(rel)
    if stale:
        log(f"deleted {len(stale)} uncommitted or replaced file(s)")
    return manifest
