"""Pick a Storage implementation from a URL."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote, urlsplit

from bmq.storage.base import Storage
from bmq.storage.fsspec_storage import FsspecStorage
from bmq.storage.local import LocalStorage

S3_PROTOCOLS = ("s3", "s3a")


def storage_options(url: str, options: dict[str, str] | None = None) -> dict[str, Any]:
    """The keyword arguments ``open_storage`` gives fsspec for ``url``.

    S3 (``s3://bucket/prefix``, via s3fs): credentials come from the standard
    ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` variables (botocore reads them) or the
    ``key``/``secret`` options; the endpoint of an S3-compatible store (SeaweedFS, MinIO ...)
    from the ``endpoint_url`` option or ``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL``, passed to
    s3fs explicitly rather than relying on the botocore version in use to read them. Listing
    caches are off: other brokers change the bucket behind this process's back."""
    protocol = url.split("://", 1)[0].lower()
    kwargs: dict[str, Any] = dict(options or {})
    if protocol in S3_PROTOCOLS:
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint and "endpoint_url" not in kwargs and "client_kwargs" not in kwargs:
            kwargs["endpoint_url"] = endpoint
        kwargs.setdefault("use_listings_cache", False)
        kwargs.setdefault("skip_instance_cache", True)
    return kwargs


def open_storage(url: str, options: dict[str, str] | None = None) -> Storage:
    """``/path``, ``relative/path`` or ``file:///path`` -> LocalStorage; any other
    ``protocol://...`` -> FsspecStorage on ``fsspec`` (``options`` are passed to the filesystem,
    e.g. ``{"host": "namenode", "port": "8020"}`` for HDFS; see ``storage_options`` for S3).

    ``hdfs://namenode:port/path`` uses fsspec's ``hdfs`` filesystem (pyarrow's HadoopFileSystem,
    which needs libhdfs and a Hadoop client configuration at run time) and the same append
    layout as local directories; ``s3://bucket/prefix`` uses s3fs and the object layout."""
    if "://" not in url:
        return LocalStorage(url)
    protocol = url.split("://", 1)[0].lower()
    if protocol in ("file", "local"):
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"file URL with a remote host is not supported: {url}")
        return LocalStorage(unquote(parts.path))
    import fsspec.core  # deferred: plain local deployments never pay for fsspec's import

    fs, root = fsspec.core.url_to_fs(url, **storage_options(url, options))
    return FsspecStorage(fs, root)
