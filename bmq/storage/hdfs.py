"""HDFS through hdfs-native: a Rust client of HDFS's own RPC and data-transfer protocols (no JVM,
no libhdfs), chosen over pyarrow's libhdfs and WebHDFS by ``bench/hdfs_clients.py``.

Durability: ``AppendFile.sync`` is HDFS's **hsync**, which hdfs-native sends with the length
update: every DataNode of the block's pipeline has written the bytes *and fsynced* its replica
before the call returns (their FsyncCount counters show it), and the NameNode records the new
length. So a flush the broker acknowledges (acks=all included) survives the broker's kill -9
and a crash or power loss of the DataNodes: it is on the disk of every replica. (hflush, which
HDFS also offers, only waits until the DataNodes *have* the bytes, in memory; hdfs-native's
Python API has no separate hflush.)

The exclusive write right: HDFS lets one client at a time write a file (its lease). A broker
that restarts after kill -9, or a partition's new owner, finds the old process's lease on the
segment it was appending to; ``claim`` recovers the lease (the NameNode closes the file at the
length all replicas hold; the old writer, if it still runs, can no longer write to it), and
``open_append`` does the same when it meets a lease held by another client.

What hdfs-native cannot read: the last block of a file still open for writing. Its reader's
length is the NameNode's length *without* that block (Hadoop's Java client asks a DataNode for
the block's visible length; hdfs-native does not, and refuses to read past). So the bytes of
the block being written are served from memory to this process's readers: each append handle
keeps the bytes since its block's start (at most one block: ``block_size``, 16 MiB unless the
``block_size`` storage option says otherwise), and ``pread`` takes from it what HDFS cannot yet
give. Readers in other processes see a segment up to its last completed block until the writer
closes it or a new owner claims it (issue #31 has the rest).
"""

from __future__ import annotations

import contextlib
import errno
import getpass
import itertools
import logging
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from urllib.parse import quote, unquote, urlencode, urlsplit

from hdfs_native import Client, FileReader, FileWriter, WriteOptions

from bmq.storage.base import AppendFile, BytesLike, ReadFile, Storage, nbytes

logger = logging.getLogger(__name__)

DEFAULT_PORT = 8020
# Small enough that a writer's in-memory tail (see the module's docstring) stays small, large
# enough that the NameNode keeps few blocks a segment (a 1 GiB segment: 64).
DEFAULT_BLOCK_SIZE = 16 << 20
# A NameNode that does not accept a connection within this long is unreachable: hdfs-native
# itself retries for ever, so its address is probed first.
CONNECT_TIMEOUT_S = 10.0
# Lease recovery waits for the DataNodes to agree on the last block's length (a few heartbeats).
LEASE_RECOVERY_TIMEOUT_S = 60.0
LEASE_RECOVERY_POLL_S = 0.2
WEBHDFS_TIMEOUT_S = 30.0
HTTP_ADDRESS_OPTION = "dfs.namenode.http-address"
CLOSE_WAIT_S = 2.0      # how long closing a file waits for a write or sync in progress
_tmp_counter = itertools.count()
# Java exception classes the NameNode reports, as the errno of the OSError raised here.
_ERRNO_OF_EXCEPTION = {
    "AccessControlException": errno.EACCES,
    "SafeModeException": errno.EROFS,
    "DSQuotaExceededException": errno.EDQUOT,
    "NSQuotaExceededException": errno.EDQUOT,
    "ParentNotDirectoryException": errno.ENOTDIR,
}


_RPC_ERROR = re.compile(r'RPCError\("([\w.$]+)", "(.*)', re.DOTALL)


@contextlib.contextmanager
def _as_os_error(path: str) -> Iterator[None]:
    """hdfs-native raises ``FileNotFoundError``/``FileExistsError`` (OSErrors) for missing and
    busy files and ``RuntimeError`` for the rest; the storage layer handles failures as
    OSError (a failed flush is KAFKA_STORAGE_ERROR, a start-up failure the STORAGE exit)."""
    try:
        yield
    except OSError:
        raise
    except RuntimeError as error:
        text = str(error)
        code = next((c for name, c in _ERRNO_OF_EXCEPTION.items() if name in text), errno.EIO)
        raise OSError(code, _first_line(text), path) from error


def _first_line(text: str) -> str:
    """What an operator reads of hdfs-native's error: the NameNode's exception, as
    ``AccessControlException: Permission denied: user=...``, without the wrapper and the
    Java stack (hdfs-native's RPCError("<class>", "<message>\\n\\tat ...")); else its text's
    first line."""
    found = _RPC_ERROR.match(text)
    if found is not None:
        name, message = found.group(1).rsplit(".", 1)[-1], found.group(2)
        text = f"{name}: {message}".replace('\\"', '"')
    return text.split("\\n", 1)[0].split("\n", 1)[0][:300]


def _lease_held_elsewhere(error: OSError) -> bool:
    """The NameNode refused to open a file for writing because another client holds its lease
    (AlreadyBeingCreatedException, which hdfs-native raises as FileExistsError)."""
    return isinstance(error, FileExistsError)


class _Tail:
    """The bytes of a file's block being written, which hdfs-native's readers cannot see yet:
    ``data`` holds the file's bytes from ``start`` (a block boundary) to its end."""

    def __init__(self, start: int, data: bytes) -> None:
        self.start = start
        self.data = bytearray(data)
        self.lock = threading.Lock()

    def extend(self, buffers: Sequence[BytesLike], block_size: int) -> None:
        with self.lock:
            for buf in buffers:
                self.data += buf
            end = self.start + len(self.data)
            boundary = end - end % block_size
            if boundary > self.start:     # whole blocks written: HDFS completes them
                del self.data[:boundary - self.start]
                self.start = boundary

    def read(self, position: int, size: int) -> bytes | None:
        """``size`` bytes at ``position`` (fewer at the end); None if they start before it."""
        with self.lock:
            if position < self.start:
                return None
            offset = position - self.start
            return bytes(self.data[offset:offset + size])


class HdfsAppendFile(AppendFile):
    def __init__(self, storage: HdfsStorage, path: str, writer: FileWriter, position: int,
                 tail: _Tail) -> None:
        self._storage = storage
        self._path = path
        self._writer = writer
        self._tail = tail
        self._lock = threading.Lock()
        self.position = position

    def write(self, buffers: Sequence[BytesLike]) -> int:
        total = 0
        with self._lock, _as_os_error(self._path):
            for buf in buffers:
                self._writer.write(buf)
                total += nbytes(buf)
            self._tail.extend(buffers, self._storage.block_size)
        self.position += total
        return total

    def sync(self) -> None:
        with self._lock, _as_os_error(self._path):
            self._writer.hsync()

    def close(self) -> None:
        # A write or sync that hangs (hdfs-native's writer can wait for ever on a DataNode that
        # died mid-pipeline) holds the lock: the writer is then left behind, and the file's
        # next writer recovers its lease.
        if not self._lock.acquire(timeout=CLOSE_WAIT_S):
            self._storage._forget_tail(self._path, self._tail)
            logger.warning("%s: a write to it hangs; its writer is given up", self._path)
            return
        try:
            with _as_os_error(self._path):
                self._writer.close()
        finally:
            self._lock.release()
            self._storage._forget_tail(self._path, self._tail)


class HdfsReadFile(ReadFile):
    """Positional reads; past the reader's length (the last, open block) from the writer's
    tail in this process, and from a reopened reader once more blocks have completed."""

    def __init__(self, storage: HdfsStorage, path: str) -> None:
        self._storage = storage
        self._path = path
        self._lock = threading.Lock()
        self._reader = storage._open_reader(path)

    def pread(self, position: int, size: int) -> bytes:
        if size <= 0:
            return b""
        with self._lock:
            data = self._read_hdfs(position, size)
            if len(data) == size:
                return data
            end = position + len(data)
            tail = self._storage._tail_of(self._path)
            more = tail.read(end, size - len(data)) if tail is not None else None
            if more is None:
                # Blocks completed since the reader was opened (or the writer closed): the
                # NameNode's length has grown.
                self._reader = self._storage._open_reader(self._path)
                data += self._read_hdfs(end, size - len(data))
                end = position + len(data)
                more = tail.read(end, size - len(data)) if tail is not None else None
                if more is None and len(data) < size:
                    # Another process writes the block: WebHDFS reads it, as far as hsynced.
                    more = self._storage.read_open_block(self._path, end, size - len(data))
            return data + (more or b"")

    def _read_hdfs(self, position: int, size: int) -> bytes:
        length = len(self._reader)
        if position >= length:
            return b""
        with _as_os_error(self._path):
            # (hdfs-native panics on a range past its length: clamp it)
            return bytes(self._reader.read_range(position, min(size, length - position)))

    def close(self) -> None:
        with self._lock:
            self._reader.close()


class HdfsStorage(Storage):
    """Files under ``hdfs://namenode:port/root``. ``options`` are hdfs-native's client
    configuration (Hadoop's keys: ``dfs.client.use.datanode.hostname``, HA name services ...),
    plus ``block_size`` (bytes) and ``replication`` for the files BMQ creates."""

    supports_append = True
    durable_sync = True     # hsync: fsynced on every DataNode of the pipeline
    # The NameNode's length of a file being written counts what its writer hsynced; what the
    # writer wrote since does not (recovery reads past it where it matters).
    exact_size = False
    fences_writers = True   # a new writer recovers the lease: the old one can write no more

    def __init__(self, url: str, options: dict[str, str] | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme.lower() != "hdfs" or not parts.hostname:
            raise ValueError(f"not an hdfs://namenode[:port]/path URL: {url}")
        config = dict(options or {})
        # Hadoop's key for the NameNode's web server: WebHDFS reads what hdfs-native cannot.
        self._webhdfs = config.pop(HTTP_ADDRESS_OPTION, None)
        self._user = os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
        self.block_size = int(config.pop("block_size", DEFAULT_BLOCK_SIZE))
        replication = config.pop("replication", None)
        self._replication = int(replication) if replication else None
        self._config = config
        self._authority = parts.netloc
        self._address = (parts.hostname, parts.port or DEFAULT_PORT)
        self.root = unquote(parts.path).rstrip("/")
        self._client_lock = threading.Lock()
        self._client_instance: Client | None = None
        self._tails: dict[str, _Tail] = {}
        self._tails_lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"hdfs://{self._authority}{self.root}"

    # ----------------------------------------------------------------------------- plumbing
    @property
    def _client(self) -> Client:
        """The client, made on first use after the NameNode accepted a connection (so that an
        unreachable one is an OSError in the first request's try, not a hang)."""
        with self._client_lock:
            if self._client_instance is None:
                host, port = self._address
                try:
                    socket.create_connection((host, port), CONNECT_TIMEOUT_S).close()
                except OSError as error:
                    reason = error.strerror or str(error) or type(error).__name__
                    raise OSError(error.errno or errno.EHOSTUNREACH,
                                  f"NameNode {host}:{port} unreachable: {reason}") from error
                self._client_instance = Client(f"hdfs://{self._authority}", self._config)
            return self._client_instance

    def _abs(self, path: str) -> str:
        return f"{self.root}/{path}" if path else (self.root or "/")

    def _write_options(self, overwrite: bool) -> WriteOptions:
        return WriteOptions(block_size=self.block_size, replication=self._replication,
                            overwrite=overwrite, create_parent=True)

    def _open_reader(self, full: str) -> FileReader:
        with _as_os_error(full):
            return self._client.read(full)

    def read_open_block(self, full: str, position: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``position`` of a file that another process writes, read
        through WebHDFS: the DataNode it redirects to serves a block being written as far as
        its writer hsynced (what hdfs-native's reader leaves out). b"" without the NameNode's
        web address (the ``dfs.namenode.http-address`` storage option) or past the end."""
        if not self._webhdfs or size <= 0:
            return b""
        query = urlencode({"op": "OPEN", "offset": position, "length": size,
                           "user.name": self._user})
        url = f"http://{self._webhdfs}/webhdfs/v1{quote(full)}?{query}"
        try:
            with urllib.request.urlopen(url, timeout=WEBHDFS_TIMEOUT_S) as answer:
                return bytes(answer.read(size))
        except urllib.error.HTTPError as error:
            if error.code in (403, 404, 416):     # past the end, or gone meanwhile
                return b""
            raise OSError(errno.EIO, f"WebHDFS: {error}", full) from error
        except (urllib.error.URLError, TimeoutError) as error:
            raise OSError(errno.EIO, f"WebHDFS: {error}", full) from error

    def _tail_of(self, path: str) -> _Tail | None:
        with self._tails_lock:
            return self._tails.get(path)

    def _forget_tail(self, path: str, tail: _Tail) -> None:
        with self._tails_lock:
            if self._tails.get(path) is tail:
                del self._tails[path]

    # ------------------------------------------------------------------- files in place
    def open_append(self, path: str) -> AppendFile:
        full = self._abs(path)
        client = self._client
        with _as_os_error(full):
            try:
                status = client.get_file_info(full)
            except FileNotFoundError:
                writer = client.create(full, self._write_options(overwrite=False))
                tail = self._register_tail(full, _Tail(0, b""))
                return HdfsAppendFile(self, full, writer, 0, tail)
            # The last, partial block becomes one being written again: keep its bytes for
            # this process's readers (read now, while HDFS can still serve them).
            block = status.blocksize or self.block_size
            start = status.length - status.length % block
            with client.read(full) as reader:
                length = len(reader)
                kept = reader.read_range(start, length - start) if length > start else b""
            writer = self._append(full)
            # (a file a dead writer left is closed by the recovery at the length it agreed:
            # the bytes read above may miss its end when recovery happened only now)
            status = client.get_file_info(full)
            if status.length != length:
                writer.close()
                return self.open_append(path)
            tail = self._register_tail(full, _Tail(start, kept))
            return HdfsAppendFile(self, full, writer, status.length, tail)

    def _register_tail(self, full: str, tail: _Tail) -> _Tail:
        with self._tails_lock:
            if full in self._tails:
                raise OSError(errno.EBUSY, "already open for appending in this process", full)
            self._tails[full] = tail
        return tail

    def _append(self, full: str) -> FileWriter:
        try:
            return self._client.append(full)
        except OSError as error:
            if not _lease_held_elsewhere(error) or self._tail_of(full) is not None:
                raise
        self._recover_lease(full)
        return self._client.append(full)

    def claim(self, path: str) -> None:
        full = self._abs(path)
        if self._tail_of(full) is None:
            with _as_os_error(full):
                self._recover_lease(full)

    def _recover_lease(self, full: str) -> None:
        """Take the lease of ``full`` from whoever holds it: the NameNode closes the file at
        the length every replica has (so at least everything its writer hsynced)."""
        deadline = time.monotonic() + LEASE_RECOVERY_TIMEOUT_S
        first = True
        while not self._client.recover_lease(full):
            if first:
                logger.info("%s: recovering the lease of %s (another writer held it)",
                            self.url, full)
                first = False
            if time.monotonic() > deadline:
                raise OSError(errno.ETIMEDOUT, "lease recovery did not finish within "
                              f"{LEASE_RECOVERY_TIMEOUT_S:.0f} s", full)
            time.sleep(LEASE_RECOVERY_POLL_S)

    def open_read(self, path: str) -> ReadFile:
        return HdfsReadFile(self, self._abs(path))

    def truncate(self, path: str, size: int) -> None:
        # hdfs-native has no truncate call: rewrite the prefix and rename it over the file.
        self.write_atomic(path, self.read_range(path, 0, size))

    # --------------------------------------------------------------------- whole files
    def read_range(self, path: str, start: int, length: int) -> bytes:
        reader = HdfsReadFile(self, self._abs(path))
        try:
            return reader.pread(start, length)
        finally:
            reader.close()

    def read_all(self, path: str) -> bytes:
        full = self._abs(path)
        with _as_os_error(full), self._client.read(full) as reader:
            return bytes(reader.readall())

    def write_atomic(self, path: str, data: BytesLike, durable: bool = True) -> None:
        full = self._abs(path)
        tmp = f"{full}.tmp.{os.getpid()}.{threading.get_ident()}.{next(_tmp_counter)}"
        client = self._client
        with _as_os_error(full):
            with client.create(tmp, self._write_options(overwrite=True)) as out:
                out.write(data)
                if durable:
                    out.hsync()    # on the DataNodes' disks before the rename publishes it
            client.rename(tmp, full, overwrite=True)

    # ------------------------------------------------------------------------ namespace
    def size(self, path: str) -> int:
        full = self._abs(path)
        tail = self._tail_of(full)
        if tail is not None:
            with tail.lock:
                return tail.start + len(tail.data)
        with _as_os_error(full):
            return int(self._client.get_file_info(full).length)

    def exists(self, path: str) -> bool:
        full = self._abs(path)
        with _as_os_error(full):
            try:
                self._client.get_file_info(full)
            except FileNotFoundError:
                return False
            return True

    def list(self, path: str) -> list[str]:
        full = self._abs(path)
        with _as_os_error(full):
            try:
                return sorted(status.path.rstrip("/").rsplit("/", 1)[-1]
                              for status in self._client.list_status(full))
            except FileNotFoundError:
                return []

    def makedirs(self, path: str) -> None:
        full = self._abs(path)
        with _as_os_error(full):
            self._client.mkdirs(full, 0o755, True)

    def delete(self, path: str) -> None:
        full = self._abs(path)
        with _as_os_error(full):
            self._client.delete(full, False)

    def delete_tree(self, path: str) -> None:
        full = self._abs(path)
        with _as_os_error(full):
            self._client.delete(full, True)

