"""The sealed part of a partition's aborted-transaction index: chunk files beside the segments
(Kafka keeps a ``.txnindex`` per segment for the same reason). The checkpoint (or manifest)
holds only the newest aborted transactions and names the chunks; once CHUNK_ENTRIES entries
are unsealed, the owner writes them to a new chunk before publishing. A chunk is written once
(an object store can hold it as well as a directory) and deleted by retention when every entry
in it is below the log start.

    aborted-{first marker offset:020d}-{last marker offset:020d}.txnindex

holding JSON [[producer id, first offset, marker offset], ...].

The log cleaner removes ABORT markers (``bmq.cleaner``) and their entries with them: a chunk
losing entries is written again, with what is left, under a name never used before (readers
cache chunks by name), ``aborted-{first}-{last}-{epoch:010d}-{seq:012d}.txnindex`` with the
owner's epoch and a sequence number of the cleaner's (``Layout.cleaned_seq``); the state
document that swaps the cleaned segments in names it instead (``rewrite_chunks``), and the old
chunk goes ``file.delete.delay.ms`` later, as the replaced segments do.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from bmq.storage.base import Storage
from bmq.storage.producer_state import AbortedTxn, ProducerStateTable

SUFFIX = ".txnindex"
CHUNK_ENTRIES = 1000


def chunk_name(entries: list[AbortedTxn]) -> str:
    return f"aborted-{entries[0].last_offset:020d}-{entries[-1].last_offset:020d}{SUFFIX}"


def encode(entries: list[AbortedTxn]) -> bytes:
    return json.dumps([list(a) for a in entries], separators=(",", ":")).encode()


def read_chunk(storage: Storage, directory: str, name: str) -> list[AbortedTxn]:
    """A chunk's entries; [] if retention deleted it meanwhile (all below the log start)."""
    try:
        data = storage.read_all(f"{directory}/{name}")
    except FileNotFoundError:
        return []
    return [AbortedTxn(*(int(x) for x in a)) for a in json.loads(data)]


def load_sealed(table: ProducerStateTable, storage: Storage, directory: str) -> None:
    """Read back the chunks a checkpoint's producer state names (after ``from_json``)."""
    entries: list[AbortedTxn] = []
    for name, _end in table.sealed:
        entries += read_chunk(storage, directory, name)
    if entries:
        table.add_sealed(entries)


@dataclass(slots=True)
class RewrittenChunks:
    """The sealed part of an index without the entries of removed ABORT markers."""

    sealed: list[tuple[str, int]] = field(default_factory=list)   # ProducerStateTable.sealed
    written: list[str] = field(default_factory=list)    # new chunk files
    replaced: list[str] = field(default_factory=list)   # chunk files no longer named


def rewrite_chunks(chunks: list[tuple[str, int, list[AbortedTxn]]], markers: Collection[int],
                   stamp: str, write: Callable[[str, bytes], None]) -> RewrittenChunks:
    """Write again (``write(name, data)``) each sealed chunk (``sealed_chunks``) holding an
    entry whose ABORT marker offset is in ``markers``, without it, under a name ending in
    ``stamp`` (one never used before); a chunk left empty is not written at all."""
    out = RewrittenChunks()
    for name, end, entries in chunks:
        kept = [a for a in entries if a.last_offset not in markers]
        if len(kept) == len(entries):
            out.sealed.append((name, end))
            continue
        out.replaced.append(name)
        if kept:
            new = f"{chunk_name(kept).removesuffix(SUFFIX)}-{stamp}{SUFFIX}"
            write(new, encode(kept))
            out.written.append(new)
            out.sealed.append((new, kept[-1].last_offset))
    return out
