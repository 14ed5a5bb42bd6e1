"""The agent's durable, bounded spool: every batch the agent makes is written here before it
is acknowledged to an application (acks=1) or sent to the cluster, and stays until the
cluster took it, so a cluster that cannot be reached, or a kill -9 of the agent, loses nothing
the agent acknowledged.

The spool is a log of segment files in its directory, each a run of frames (length,
CRC-32C, type, payload). A BATCH frame holds one record batch for one topic partition; an
ASSIGN frame the producer id, epoch and sequence the batch was sent with (written before it is
sent, so a batch sent again after a restart carries the same ones and the cluster's
idempotence recognises it if it had taken it); a DONE frame says the cluster took the batch
(or refused it for good); a CLIENT_IN frame that an idempotent client's batch (its producer
id, epoch, stream and sequences) is in the spool, and in which of its batches, so that the
client's retry of it after a restart of the agent is answered, not taken again, and with
acks=all once those batches are sent (each segment starts with the last five of every client
and stream; a CLIENT frame, which earlier agents wrote, says the same without the batches).
Batches are made durable together (one fsync for all those written meanwhile: a group
commit); ASSIGN and DONE frames are written to the operating system at
once but not fsynced (a process killed keeps them; after a machine's crash a batch may be sent
again, and the cluster's idempotence answers it as a duplicate if its sequence is among the
producer's last five batches).

A segment is deleted once every batch in it is done and every older segment is gone (its DONE
frames may be in later segments, so segments go in order). On start, a torn frame at the end
(the process died while writing) is cut off."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import struct
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from bmq.protocol.records import seal_crc

log = logging.getLogger(__name__)

SEGMENT_BYTES = 64 << 20
_FRAME = struct.Struct(">IIB")      # length of type + payload, CRC-32C of them, type
_BATCH = struct.Struct(">QiH")      # id, partition, topic length (topic and batch follow)
_ID = struct.Struct(">Q")
_ASSIGN = struct.Struct(">Qqhi")    # id, producer id, epoch, base sequence
_CLIENT = struct.Struct(">qhii")    # producer id, epoch, base sequence, records (stream follows)
# The same, the stream's length, then the stream and the ids of the batches its records are in.
_CLIENT_IN = struct.Struct(">qhiiH")
_IDS = struct.Struct(">Q")
BATCH, ASSIGN, DONE, CLIENT, CLIENT_IN = 1, 2, 3, 4, 5
# An idempotent client's batches remembered per producer and stream: the last five, as a Kafka
# leader keeps them (a client retries no older one), for this many producer-streams.
CLIENT_WINDOW = 5
CLIENT_STREAMS = 100_000
# Where a record batch keeps its producer id, epoch and base sequence (RecordBatch v2).
_PRODUCER = struct.Struct(">qhi")
_PRODUCER_AT = 43
_RECORDS = struct.Struct(">i")
_RECORDS_AT = 57
SUFFIX = ".spool"
# One agent process a spool: another one (an agent started twice on the same directory, or a
# worker of the last run not yet gone) is waited for this long, then the start fails.
LOCK_FILE = ".lock"
LOCK_WAIT_S = 10.0


@dataclass(frozen=True)
class ClientBatch:
    """A batch of an idempotent client of the agent, taken: its records are in the spool."""

    producer_id: int
    epoch: int
    stream: str
    base_sequence: int
    records: int
    batch_ids: tuple[int, ...] = ()     # the spool's batches its records are in


class SpoolFull(Exception):
    """The spool holds as many bytes as it may: nothing more is taken until batches leave."""


@dataclass(eq=False)
class SpooledBatch:
    id: int
    topic: str
    partition: int
    data: bytearray
    segment: int                    # the first id of the segment it is in
    producer: tuple[int, int, int] | None = None     # (id, epoch, base sequence) it was sent with
    durable: bool = False
    records: int = 0


@dataclass
class _Segment:
    first_id: int
    path: Path
    live: set[int] = field(default_factory=set)      # batches in it not done


class Spool:
    def __init__(self, directory: str | Path, limit_bytes: int,
                 segment_bytes: int = SEGMENT_BYTES) -> None:
        self.directory = Path(directory)
        self.limit_bytes = limit_bytes
        self.segment_bytes = segment_bytes
        self.used_bytes = 0                 # of the batches not done
        self.next_id = 0
        self._segments: list[_Segment] = []
        self._fd = -1
        self._lock_fd = -1
        self._written = 0                   # bytes written to the current segment
        self._writes = 0                    # frames written, and of those made durable:
        self._synced = 0
        self._syncing: asyncio.Future[None] | None = None
        self._waiting: list[tuple[int, asyncio.Future[None]]] = []
        # The last batches of each idempotent client and stream (``remember``); the spool
        # keeps them so that a client's retry after a restart is recognised.
        self.client_batches: OrderedDict[tuple[int, str], deque[ClientBatch]] = OrderedDict()

    # -- start ---------------------------------------------------------------------------
    def recover(self) -> list[SpooledBatch]:
        """Open the spool (made if missing) and return the batches not done, oldest first."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock()
        batches: dict[int, SpooledBatch] = {}
        assigned: dict[int, tuple[int, int, int]] = {}
        done: set[int] = set()
        paths = sorted(self.directory.glob(f"*{SUFFIX}"))
        for path in paths:
            segment = _Segment(int(path.stem), path)
            self._segments.append(segment)
            for kind, payload in _read_frames(path):
                if kind == BATCH:
                    batch_id, partition, topic_length = _BATCH.unpack_from(payload)
                    start = _BATCH.size + topic_length
                    topic = bytes(payload[_BATCH.size:start]).decode()
                    data = bytearray(payload[start:])
                    batches[batch_id] = SpooledBatch(
                        batch_id, topic, partition, data, segment.first_id, durable=True,
                        records=_RECORDS.unpack_from(data, _RECORDS_AT)[0])
                    segment.live.add(batch_id)
                    self.next_id = max(self.next_id, batch_id + 1)
                elif kind == ASSIGN:
                    batch_id, producer_id, epoch, sequence = _ASSIGN.unpack_from(payload)
                    assigned[batch_id] = (producer_id, epoch, sequence)
                elif kind == DONE:
                    done.add(_ID.unpack_from(payload)[0])
                elif kind in (CLIENT, CLIENT_IN):
                    self._keep(_client_batch(kind, payload))
        pending = []
        for batch_id in sorted(batches):
            batch = batches[batch_id]
            segment = self._segment_of(batch)
            if batch_id in done:
                segment.live.discard(batch_id)
                continue
            producer = assigned.get(batch_id)
            if producer is not None:
                _stamp(batch, *producer)
            self.used_bytes += len(batch.data)
            pending.append(batch)
        self._delete_done_segments()
        self._open_segment()
        return pending

    # -- writing -------------------------------------------------------------------------
    def append(self, topic: str, partition: int, data: bytearray, records: int) -> SpooledBatch:
        """Write a batch (durable once ``sync`` returns); SpoolFull past the limit."""
        if self.used_bytes + len(data) > self.limit_bytes:
            raise SpoolFull(f"databus spool full ({self.used_bytes} of {self.limit_bytes} "
                            f"bytes waiting for the cluster)")
        if self._written >= self.segment_bytes:
            self._open_segment()
        batch = SpooledBatch(self.next_id, topic, partition, data,
                             self._segments[-1].first_id, records=records)
        self.next_id += 1
        raw = topic.encode()
        self._write(BATCH, [_BATCH.pack(batch.id, partition, len(raw)), raw, data])
        self._segments[-1].live.add(batch.id)
        self.used_bytes += len(data)
        return batch

    async def sync(self) -> None:
        """Return once everything written so far is on disk (one fsync for many callers)."""
        target = self._writes
        if self._synced >= target:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((target, future))
        if self._syncing is None:
            self._start_sync()
        await future

    def remember(self, taken: ClientBatch) -> None:
        """An idempotent client's batch is in the spool (written after its records' batches,
        so made durable with them)."""
        self._keep(taken)
        self._write(CLIENT_IN, [_client_frame(taken)])

    def _keep(self, taken: ClientBatch) -> None:
        key = (taken.producer_id, taken.stream)
        window = self.client_batches.get(key)
        if window is None:
            window = self.client_batches[key] = deque(maxlen=CLIENT_WINDOW)
            while len(self.client_batches) > CLIENT_STREAMS:
                self.client_batches.popitem(last=False)
        elif taken in window:
            return          # written again into a newer segment
        self.client_batches.move_to_end(key)
        window.append(taken)

    def assign(self, batch: SpooledBatch, producer_id: int, epoch: int, sequence: int) -> None:
        """Give the batch the producer id, epoch and base sequence it is sent with."""
        _stamp(batch, producer_id, epoch, sequence)
        self._write(ASSIGN, [_ASSIGN.pack(batch.id, producer_id, epoch, sequence)])

    def done(self, batch: SpooledBatch) -> None:
        """The cluster took the batch (or refused it for good): it leaves the spool."""
        self._write(DONE, [_ID.pack(batch.id)])
        self.used_bytes -= len(batch.data)
        self._segment_of(batch).live.discard(batch.id)
        self._delete_done_segments()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._lock_fd >= 0:
            os.close(self._lock_fd)         # (the lock goes with it)
            self._lock_fd = -1

    def _lock(self) -> None:
        fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                os.close(fd)
                raise OSError(f"in use by another agent process for {LOCK_WAIT_S:g} s") \
                    from None
            self._lock_fd = fd
            return

    # -- inside ----------------------------------------------------------------------------
    def _write(self, kind: int, parts: list[bytes | bytearray]) -> None:
        body = b"".join([bytes([kind]), *parts])
        frame = _FRAME.pack(len(body), crc32c.crc32c(body), kind)[:8] + body
        os.write(self._fd, frame)
        self._written += len(frame)
        self._writes += 1

    def _start_sync(self) -> None:
        target = self._writes
        fd = self._fd
        loop = asyncio.get_running_loop()
        self._syncing = loop.run_in_executor(None, os.fsync, fd)
        self._syncing.add_done_callback(lambda done: self._synced_to(target, done))

    def _synced_to(self, target: int, done: asyncio.Future[None]) -> None:
        self._syncing = None
        error = done.exception()
        if error is None:
            self._synced = max(self._synced, target)
        still = []
        for wanted, future in self._waiting:
            if future.done():
                continue
            if error is not None:
                future.set_exception(error)
            elif wanted <= self._synced:
                future.set_result(None)
            else:
                still.append((wanted, future))
        self._waiting = still
        if still:
            self._start_sync()

    def _open_segment(self) -> None:
        """A new segment named by the next id: the previous one is made durable first (its
        batches' fsync must not be lost with its descriptor)."""
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._synced = self._writes
        path = self.directory / f"{self.next_id:020d}{SUFFIX}"
        if self._segments and self._segments[-1].path == path:
            segment = self._segments[-1]
        else:
            segment = _Segment(self.next_id, path)
            self._segments.append(segment)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._written = os.fstat(self._fd).st_size
        _fsync_directory(self.directory)
        # The clients' last batches again, in the newest segment: the older ones, where they
        # were written, are deleted once their batches are done.
        for window in self.client_batches.values():
            for taken in window:
                self._write(CLIENT_IN, [_client_frame(taken)])

    def _segment_of(self, batch: SpooledBatch) -> _Segment:
        for segment in self._segments:
            if segment.first_id == batch.segment:
                return segment
        raise KeyError(batch.segment)

    def _delete_done_segments(self) -> None:
        while len(self._segments) > 1 and not self._segments[0].live:
            segment = self._segments.pop(0)
            segment.path.unlink(missing_ok=True)


def _client_frame(taken: ClientBatch) -> bytes:
    stream = taken.stream.encode()
    return b"".join([_CLIENT_IN.pack(taken.producer_id, taken.epoch, taken.base_sequence,
                                     taken.records, len(stream)), stream,
                     *(_IDS.pack(i) for i in taken.batch_ids)])


def _stamp(batch: SpooledBatch, producer_id: int, epoch: int, sequence: int) -> None:
    """The producer fields of the batch's header set (and its CRC sealed again)."""
    batch.producer = (producer_id, epoch, sequence)
    _PRODUCER.pack_into(batch.data, _PRODUCER_AT, producer_id, epoch, sequence)
    seal_crc(batch.data)


def client_batches_in(directory: Path) -> list[ClientBatch]:
    """The idempotent clients' batches another agent process's spool remembers, oldest first,
    read as it is (it may be writing: a frame not whole yet ends the reading, and is left)."""
    taken = []
    for path in sorted(directory.glob(f"*{SUFFIX}")):
        with contextlib.suppress(FileNotFoundError):     # (deleted meanwhile: done)
            frames, _ = _whole_frames(path.read_bytes())
            taken += [_client_batch(kind, payload) for kind, payload in frames
                      if kind in (CLIENT, CLIENT_IN)]
    return taken


def _client_batch(kind: int, payload: memoryview) -> ClientBatch:
    if kind == CLIENT:          # (written by an agent before batch ids were)
        producer_id, epoch, sequence, records = _CLIENT.unpack_from(payload)
        return ClientBatch(producer_id, epoch, bytes(payload[_CLIENT.size:]).decode(),
                           sequence, records)
    producer_id, epoch, sequence, records, length = _CLIENT_IN.unpack_from(payload)
    start = _CLIENT_IN.size + length
    ids = tuple(i for (i,) in _IDS.iter_unpack(payload[start:]))
    return ClientBatch(producer_id, epoch, bytes(payload[_CLIENT_IN.size:start]).decode(),
                       sequence, records, ids)


def _whole_frames(data: bytes) -> tuple[list[tuple[int, memoryview]], int]:
    """The whole frames at the start of ``data``, and where they end."""
    view = memoryview(data)
    frames = []
    pos = 0
    while pos + 8 <= len(data):
        length, crc = struct.unpack_from(">II", data, pos)
        body = view[pos + 8:pos + 8 + length]
        if length < 1 or len(body) < length or crc32c.crc32c(body) != crc:
            break
        frames.append((body[0], body[1:]))
        pos += 8 + length
    return frames, pos


def _read_frames(path: Path) -> list[tuple[int, memoryview]]:
    """The whole frames of a segment; a torn or corrupt tail is cut off the file."""
    data = path.read_bytes()
    frames, pos = _whole_frames(data)
    if pos < len(data):
        log.warning("spool %s: cutting off %d bytes of a torn write at %d", path,
                    len(data) - pos, pos)
        with open(path, "r+b") as fh:
            fh.truncate(pos)
            os.fsync(fh.fileno())
    return frames


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
