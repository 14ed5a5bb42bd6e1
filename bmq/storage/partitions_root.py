"""The partitions' root from the storage URL a user has at hand.

Brokers keep partitions under ``<storage>/topics/<topic>/<partition>/``: `bmq serve
--data-dir DIR` under ``DIR/topics``, cluster brokers (``bmq broker --storage URL``) under
``URL/topics`` (``factory.open_log_storage``). Outside readers (the Spark source, the Parquet
job) accept either the brokers' own URL or the ``.../topics`` directory itself, so users can
copy the URL they gave the brokers. A URL whose root holds a ``topics`` entry that is not itself
a topic (a topic directory holds numeric partition directories) is the brokers' URL.
"""

from __future__ import annotations

from bmq.storage.base import Storage
from bmq.storage.factory import open_storage

PARTITIONS_DIR = "topics"
# How many entries of a wrong URL's root an error names.
_SHOWN_ENTRIES = 8


def _is_topic(storage: Storage, name: str) -> bool:
    try:
        return any(entry.isdigit() for entry in storage.list(name))
    except NotADirectoryError:   # a file (local storage lists only directories)
        return False


def topic_dirs(storage: Storage) -> list[str]:
    """The topics at a partitions root: entries holding partition directories."""
    return [n for n in storage.list("") if not n.startswith((".", "_")) and _is_topic(storage, n)]


def partitions_root_url(url: str, options: dict[str, str] | None = None) -> str:
    """The URL of the partitions' directory for ``url``: the brokers' storage URL (a `bmq
    serve` data directory as a path or ``file://`` URL, or a cluster's ``s3://`` /
    ``hdfs://`` / ``file://`` URL) or that directory itself."""
    storage = open_storage(url, options)
    try:
        if PARTITIONS_DIR in storage.list("") and not _is_topic(storage, PARTITIONS_DIR):
            return url.rstrip("/") + "/" + PARTITIONS_DIR
        return url
    finally:
        storage.close()


def describe_root(storage: Storage) -> str:
    """What is at a partitions root, for the error of a topic not found there."""
    names = storage.list("")
    if not names:
        return "nothing (no such directory, or an empty one)"
    topics = topic_dirs(storage)
    if topics:
        shown = ", ".join(topics[:_SHOWN_ENTRIES])
        more = f" and {len(topics) - _SHOWN_ENTRIES} more" if len(topics) > _SHOWN_ENTRIES \
            else ""
        return f"the topics {shown}{more}"
    shown = ", ".join(names[:_SHOWN_ENTRIES])
    more = f" and {len(names) - _SHOWN_ENTRIES} more" if len(names) > _SHOWN_ENTRIES else ""
    return (f"no topic directories (TOPIC/PARTITION/), only {shown}{more}: give the URL the "
            f"brokers were given (--storage, or --data-dir) or its topics directory")
