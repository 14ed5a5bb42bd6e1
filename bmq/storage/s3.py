"""S3 and S3-compatible stores: obstore's fsspec file system, failing with OSError.

The rest of the storage layer handles storage failures as ``OSError``, as local files, HDFS and
s3fs raise them: a checkpoint that could not be published is retried, a failed flush fails the
partition with KAFKA_STORAGE_ERROR. obstore raises its own exception classes (only a missing
object is a ``FileNotFoundError``), so the calls BMQ makes translate them here.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from typing import Any

from obstore.exceptions import BaseError, PermissionDeniedError, UnauthenticatedError
from obstore.fsspec import FsspecStore


@contextlib.contextmanager
def _as_os_error(path: str) -> Iterator[None]:
    try:
        yield
    except (PermissionDeniedError, UnauthenticatedError) as error:
        raise PermissionError(errno.EACCES, str(error), path) from error
    except BaseError as error:
        raise OSError(errno.EIO, str(error), path) from error


class S3FileSystem(FsspecStore):
    """``FsspecStore("s3", ...)`` whose failures are ``OSError``s (see the module docstring)."""

    async def _pipe_file(self, path: str, value: Any, *args: Any, **kwargs: Any) -> Any:
        with _as_os_error(path):
            return await super()._pipe_file(path, value, *args, **kwargs)

    async def _cat_file(self, path: str, *args: Any, **kwargs: Any) -> bytes:
        with _as_os_error(path):
            return await super()._cat_file(path, *args, **kwargs)

    async def _info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        with _as_os_error(path):
            return await super()._info(path, **kwargs)

    async def _ls(self, path: str, *args: Any, **kwargs: Any) -> Any:
        with _as_os_error(path):
            return await super()._ls(path, *args, **kwargs)

    async def _rm_file(self, path: str, **kwargs: Any) -> None:
        with _as_os_error(path):
            await super()._rm_file(path, **kwargs)
