"""A `bmq serve` data directory: checked before anything is created, and held by one process.

Two processes writing one partition log lose acknowledged records (each appends at the offsets
it believes are next, over the other's bytes). Kafka prevents it by taking an exclusive file lock
on ``.lock`` in each log directory for the broker's life; so does this module, with ``flock`` on
``DATA_DIR/.lock``. The kernel drops the lock when the process dies, kill -9 included, so a
crashed server never leaves a directory that needs cleaning by hand. The file itself stays (as
Kafka's does): deleting it would let a process that opened the old file and one that creates a
new one both "hold" the lock.

Cluster brokers on shared ``file://`` storage do not take it: they share the directory by design
and epoch fencing keeps each partition to one writer.
"""

from __future__ import annotations

import contextlib
import fcntl
import os

from bmq.startup import ExitCode, StartupError

LOCK_FILE = ".lock"


def _storage_error(message: str) -> StartupError:
    return StartupError(message, ExitCode.STORAGE)


def check_data_dir(path: str) -> None:
    """Raise a ``StartupError`` (STORAGE) if ``path`` cannot serve as a data directory: it exists
    but is not a directory or not readable and writable, or it does not exist and cannot be
    created. Creates nothing, so a server that fails later (its port is taken) leaves no trace."""
    path = os.path.abspath(path)
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise _storage_error(f"data directory {path} exists and is not a directory")
        if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
            raise _storage_error(f"data directory {path} is not readable and writable "
                                 f"by this user (uid {os.getuid()})")
        return
    parent = os.path.dirname(path)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise _storage_error(f"cannot create data directory {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise _storage_error(f"cannot create data directory {path}: {parent} is not writable "
                             f"by this user (uid {os.getuid()})")


class DataDirLock:
    """The exclusive lock on a data directory, held until ``release`` or the process's end."""

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _holder_pid(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        text = os.pread(fd, 32, 0).decode().strip()
        if text.isdigit():
            return text
    return "unknown"   # the holder is between taking the lock and writing its pid


def lock_data_dir(path: str) -> DataDirLock:
    """Create ``path`` if needed and lock it for this process, or raise a ``StartupError``:
    DATA_DIR_LOCKED naming the holder's pid, or STORAGE if the directory cannot be used."""
    path = os.path.abspath(path)
    try:
        os.makedirs(path, exist_ok=True)
        fd = os.open(os.path.join(path, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as error:
        raise _storage_error(f"cannot use data directory {path}: {error.strerror}") from error
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder_pid(fd)
        os.close(fd)
        raise StartupError(f"another bmq process (pid {holder}) is using {path}",
                           ExitCode.DATA_DIR_LOCKED) from None
    # The pid is for the message above and for operators (`cat DATA_DIR/.lock`); the lock
    # itself is the flock, so a stale pid left by a killed process means nothing.
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return DataDirLock(path, fd)
