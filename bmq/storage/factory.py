"""Pick a Storage implementation from a URL."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from bmq.startup import ExitCode, StartupError, missing_package
from bmq.storage.base import Storage
from bmq.storage.fsspec_storage import FsspecStorage
from bmq.storage.local import LocalStorage

if TYPE_CHECKING:
    from bmq.storage.hdfs import HdfsStorage

S3_PROTOCOLS = ("s3", "s3a")
HDFS_PROTOCOLS = ("hdfs",)
# The packages of the extras each backend needs (pyproject's optional dependencies): a missing
# one is a MissingPackageError naming ``pip install 'bmq[EXTRA]'``.
S3_PACKAGES = frozenset({"obstore"})
HDFS_PACKAGES = frozenset({"hdfs_native"})
# s3fs's option names, which BMQ documented before it moved to obstore, and their obstore keys.
_S3FS_OPTION_NAMES = {"key": "access_key_id", "secret": "secret_access_key",
                      "token": "session_token", "endpoint_url": "endpoint",
                      "region_name": "region"}
# A request that keeps failing surfaces as a storage error after this long rather than obstore's
# default 3 minutes: a broker's flush (and its producers' acks) waits on it. The options
# ``retry_timeout_s`` and ``max_retries`` change them.
S3_RETRY_TIMEOUT_S = 30.0
S3_MAX_RETRIES = 5


def storage_options(url: str, options: dict[str, str] | None = None) -> dict[str, Any]:
    """The keyword arguments ``open_storage`` gives the fsspec filesystem for ``url``.

    S3 (``s3://bucket/prefix``) goes through obstore's fsspec filesystem (Rust's object_store:
    a tenth of s3fs's import time and a third of its CPU per request, measured). ``options``
    are obstore's S3 settings (``endpoint``, ``access_key_id``, ``secret_access_key``,
    ``region``, ``session_token``, ``virtual_hosted_style_request``, ...; s3fs's names
    ``endpoint_url``, ``key``, ``secret``, ``token`` and ``region_name`` are accepted too),
    plus ``max_retries`` and ``retry_timeout_s`` for failing requests (5 and 30 s).
    Anything not given comes from the standard ``AWS_*`` variables (``AWS_ACCESS_KEY_ID``,
    ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION`` ...), the endpoint of an S3-compatible store
    (SeaweedFS, MinIO ...) from ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``; plain-HTTP
    endpoints are allowed. Other filesystems get ``options`` as they are."""
    protocol = url.split("://", 1)[0].lower()
    if protocol not in S3_PROTOCOLS:
        return dict(options or {})
    config: dict[str, Any] = {_S3FS_OPTION_NAMES.get(k, k): v for k, v in (options or {}).items()}
    retry_config = {
        "max_retries": int(config.pop("max_retries", S3_MAX_RETRIES)),
        "retry_timeout": timedelta(seconds=float(config.pop("retry_timeout_s",
                                                            S3_RETRY_TIMEOUT_S)))}
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint and "endpoint" not in config:
        config["endpoint"] = endpoint
    if not any(k in config for k in ("region", "aws_region")) and not (
            os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")):
        config["region"] = "us-east-1"   # what S3-compatible stores expect in the signature
    client_options = {"allow_http": str(config.get("endpoint", "")).startswith("http://")}
    return {"config": config, "client_options": client_options, "retry_config": retry_config}


def open_storage(url: str, options: dict[str, str] | None = None) -> Storage:
    """``/path``, ``relative/path`` or ``file:///path`` -> LocalStorage; any other
    ``protocol://...`` -> FsspecStorage on ``fsspec`` (``options`` are passed to the filesystem,
    see ``storage_options`` for S3).

    ``hdfs://namenode[:port]/path`` is ``HdfsStorage`` (hdfs-native, no JVM; ``options`` are its
    Hadoop client settings plus ``block_size`` and ``replication``) with the same append layout
    as local directories; ``s3://bucket/prefix`` uses obstore's fsspec filesystem and the
    object layout."""
    if "://" not in url:
        return LocalStorage(url)
    protocol = url.split("://", 1)[0].lower()
    if protocol in ("file", "local"):
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"file URL with a remote host is not supported: {url}")
        return LocalStorage(unquote(parts.path))
    if protocol in S3_PROTOCOLS:
        parts = urlsplit(url)
        if not parts.netloc:
            raise ValueError(f"S3 URL without a bucket: {url}")
        fs = _s3_filesystem_class(protocol)("s3", **storage_options(url, options))
        return FsspecStorage(fs, f"{parts.netloc}/{unquote(parts.path).strip('/')}".rstrip("/"))
    if protocol in HDFS_PROTOCOLS:
        return _hdfs_storage_class(protocol)(url, options)
    import fsspec.core  # deferred: plain local deployments never pay for fsspec's import

    _fsspec_class(protocol)
    fs, root = fsspec.core.url_to_fs(url, **storage_options(url, options))
    return FsspecStorage(fs, root)


def check_backend(url: str) -> None:
    """Raise the ``MissingPackageError`` that opening ``url`` would raise, without opening it
    (a local directory is created when opened; a role checks first, opens later)."""
    protocol = url.split("://", 1)[0].lower() if "://" in url else "file"
    if protocol in S3_PROTOCOLS:
        _s3_filesystem_class(protocol)
    elif protocol in HDFS_PROTOCOLS:
        _hdfs_storage_class(protocol)
    elif protocol not in ("file", "local"):
        _fsspec_class(protocol)


def _s3_filesystem_class(protocol: str) -> type[Any]:
    try:
        from bmq.storage.s3 import S3FileSystem  # deferred like fsspec's imports
    except ModuleNotFoundError as error:
        raise missing_package(error, "s3", f"{protocol}:// storage", S3_PACKAGES) or error \
            from None
    return S3FileSystem


def _hdfs_storage_class(protocol: str) -> type[HdfsStorage]:
    # hdfs-native reports a DataNode dropped from a write pipeline (and its replacement, or
    # that none was found) through Rust's env_logger, read once at import: on stderr, in the
    # role's log, unless RUST_LOG says otherwise.
    os.environ.setdefault("RUST_LOG", "hdfs_native=warn")
    try:
        from bmq.storage.hdfs import HdfsStorage  # deferred like fsspec's imports
    except ModuleNotFoundError as error:
        raise missing_package(error, "hdfs", f"{protocol}:// storage", HDFS_PACKAGES) or error \
            from None
    return HdfsStorage


def _fsspec_class(protocol: str) -> type[Any]:
    import fsspec

    filesystem: type[Any] = fsspec.get_filesystem_class(protocol)
    return filesystem


def open_log_storage(url: str, options: dict[str, str] | None = None) -> Storage:
    """The partitions' storage of a cluster at ``url``: ``<url>/topics`` (the same layout as
    `bmq serve`'s data directory), as brokers, proxies and controllers open it."""
    return open_storage(url.rstrip("/") + "/topics", options)


def unusable_storage(url: str, error: OSError) -> StartupError:
    """The ``StartupError`` of a role whose storage at ``url`` failed its first request
    (unreachable endpoint, no permission, no such bucket): one line, STORAGE's exit code."""
    reason = str(error.strerror or error).strip().splitlines()[0][:300]
    return StartupError(f"storage {url} cannot be used: {reason}", ExitCode.STORAGE)
