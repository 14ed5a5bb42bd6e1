"""Pick a Storage implementation from a URL."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from bmq.storage.base import Storage
from bmq.storage.fsspec_storage import FsspecStorage
from bmq.storage.local import LocalStorage


def open_storage(url: str, options: dict[str, str] | None = None) -> Storage:
    """``/path``, ``relative/path`` or ``file:///path`` -> LocalStorage; any other
    ``protocol://...`` -> FsspecStorage on ``fsspec`` (``options`` are passed to the filesystem,
    e.g. ``{"host": "namenode", "port": "8020"}`` for HDFS)."""
    if "://" not in url:
        return LocalStorage(url)
    protocol = url.split("://", 1)[0].lower()
    if protocol in ("file", "local"):
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"file URL with a remote host is not supported: {url}")
        return LocalStorage(unquote(parts.path))
    import fsspec.core  # deferred: plain local deployments never pay for fsspec's import

    fs, root = fsspec.core.url_to_fs(url, **(options or {}))
    return FsspecStorage(fs, root)
