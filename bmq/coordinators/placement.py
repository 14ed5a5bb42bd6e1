"""Which partition of an internal topic (and so which coordinator) a key belongs to.

Kafka places a group on partition ``abs(groupId.hashCode()) % offsets.topic.num.partitions`` (and a
transactional id likewise on ``__transaction_state``), where ``hashCode`` is Java's
``String.hashCode`` (31-polynomial over UTF-16 code units, 32-bit overflow) and ``abs`` is Kafka's
``Utils.abs`` (``n & 0x7fffffff``, so MIN_VALUE maps to 0). Using the same function keeps a key on
the same partition a Kafka cluster would pick.
"""

from __future__ import annotations


def java_string_hashcode(text: str) -> int:
    """Java's ``String.hashCode()`` as a signed 32-bit int."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, num_partitions: int) -> int:
    """The partition that stores (and whose owner coordinates) ``key``."""
    return (java_string_hashcode(key) & 0x7FFFFFFF) % num_partitions
