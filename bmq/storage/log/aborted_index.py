"""The sealed part of a partition's aborted-transaction index: chunk files beside the segments
(Kafka keeps a ``.txnindex`` per segment for the same reason). The checkpoint (or manifest)
holds only the newest aborted transactions and names the chunks; once CHUNK_ENTRIES entries
are unsealed, the owner writes them to a new chunk before publishing. A chunk is written once
(an object store can hold it as well as a directory) and deleted by retention when every entry
in it is below the log start.

    aborted-{first marker offset:020d}-{last marker offset:020d}.txnindex

holding JSON [[producer id, first offset, marker offset], ...].
"""

from __future__ import annotations

import json

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
