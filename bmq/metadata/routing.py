"""Which proxy leads a partition in the Metadata proxies hand out.

Rendezvous (highest random weight) hashing over the live proxies: every proxy computes the same
answer without talking to the others, load is spread evenly, and when a proxy joins or leaves
only the partitions it gains or loses move (about 1/n of them), as the issue asks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def _weight(topic: str, partition: int, node_id: int) -> bytes:
    return hashlib.blake2b(f"{topic}\0{partition}\0{node_id}".encode(), digest_size=8).digest()


def proxy_for(topic: str, partition: int, proxies: Iterable[int]) -> int:
    """The node id of the proxy leading ``topic``/``partition`` (-1 if there is none)."""
    return max(proxies, key=lambda node: _weight(topic, partition, node), default=-1)
