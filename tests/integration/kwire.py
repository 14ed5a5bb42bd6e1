"""A small, hand-written Kafka wire client for tests that need to send exact bytes.

Only non-flexible (pre-KIP-482) request versions are encoded here; the version used for each
API is the highest non-flexible one inside the range the broker advertises. Written from the
Kafka protocol documentation, independent of the broker's own codec.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

# API keys
PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
INIT_PRODUCER_ID = 22

# Highest version of each request whose encoding is non-flexible.
NON_FLEXIBLE_MAX = {
    PRODUCE: 8,
    FETCH: 11,
    LIST_OFFSETS: 5,
    METADATA: 8,
    API_VERSIONS: 2,
    CREATE_TOPICS: 4,
    DELETE_TOPICS: 3,
    INIT_PRODUCER_ID: 1,
}

# Error codes
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42


# ----------------------------------------------------------------------------- crc32c

def _make_crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _make_crc32c_table()


def _crc32c_py(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


try:  # a C implementation when one is installed; results are identical
    import crc32c as _crc32c_mod

    def crc32c(data: bytes) -> int:
        return int(_crc32c_mod.crc32c(data))
except ImportError:  # pragma: no cover
    crc32c = _crc32c_py


# ----------------------------------------------------------------------------- encoding

def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(v: str | None) -> bytes:
    if v is None:
        return i16(-1)
    raw = v.encode()
    return i16(len(raw)) + raw


def nbytes(v: bytes | None) -> bytes:
    if v is None:
        return i32(-1)
    return i32(len(v)) + v


def array(items: Sequence[bytes] | None) -> bytes:
    if items is None:
        return i32(-1)
    return i32(len(items)) + b"".join(items)


def uvarint(v: int) -> bytes:
    out = bytearray()
    while True:
        byte = v & 0x7F
        v >>= 7
        if v:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def varint(v: int) -> bytes:
    """Zig-zag signed varint (also used for varlong)."""
    return uvarint((v << 1) ^ (v >> 63))


def varbytes(v: bytes | None) -> bytes:
    if v is None:
        return varint(-1)
    return varint(len(v)) + v


class Reader:
    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError(f"short read: need {n} bytes at {self.pos}, have {len(self.data)}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def i8(self) -> int:
        return int(struct.unpack(">b", self._take(1))[0])

    def i16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def i32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def u32(self) -> int:
        return int(struct.unpack(">I", self._take(4))[0])

    def i64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self._take(n).decode()

    def nbytes(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self._take(n)

    def array(self, item: Any) -> list[Any] | None:
        n = self.i32()
        return None if n < 0 else [item(self) for _ in range(n)]

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            byte = self._take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    def varint(self) -> int:
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def varbytes(self) -> bytes | None:
        n = self.varint()
        return None if n < 0 else self._take(n)

    def remaining(self) -> int:
        return len(self.data) - self.pos


# ----------------------------------------------------------------------------- record batches

@dataclass
class Record:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp_delta: int = 0


def encode_record(offset_delta: int, rec: Record) -> bytes:
    body = (i8(0) + varint(rec.timestamp_delta) + varint(offset_delta)
            + varbytes(rec.key) + varbytes(rec.value) + varint(len(rec.headers))
            + b"".join(varbytes(k.encode()) + varbytes(v) for k, v in rec.headers))
    return varint(len(body)) + body


def build_record_batch(records: Sequence[Record], *, base_timestamp: int | None = None,
                       attributes: int = 0, producer_id: int = -1, producer_epoch: int = -1,
                       base_sequence: int = -1, base_offset: int = 0) -> bytes:
    """An uncompressed magic-v2 RecordBatch with a correct CRC-32C."""
    if base_timestamp is None:
        base_timestamp = int(time.time() * 1000)
    payload = b"".join(encode_record(i, r) for i, r in enumerate(records))
    max_ts = base_timestamp + max((r.timestamp_delta for r in records), default=0)
    after_crc = (i16(attributes) + i32(len(records) - 1) + i64(base_timestamp) + i64(max_ts)
                 + i64(producer_id) + i16(producer_epoch) + i32(base_sequence)
                 + i32(len(records)) + payload)
    crc = crc32c(after_crc)
    # batchLength counts everything after the length field itself.
    batch_length = 4 + 1 + 4 + len(after_crc)
    return (i64(base_offset) + i32(batch_length) + i32(-1) + i8(2)
            + struct.pack(">I", crc) + after_crc)


@dataclass
class Batch:
    base_offset: int
    batch_length: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    record_count: int
    raw: bytes
    records: list[tuple[int, Record]] | None  # (offset, record); None when compressed

    @property
    def compression(self) -> int:
        return self.attributes & 0x07

    def crc_ok(self) -> bool:
        return crc32c(self.raw[21:]) == self.crc


def parse_record_batches(data: bytes) -> list[Batch]:
    """Every complete magic-v2 batch in ``data`` (a trailing partial batch is ignored)."""
    batches: list[Batch] = []
    pos = 0
    while pos + 12 <= len(data):
        base_offset, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        if end > len(data):
            break
        raw = data[pos:end]
        r = Reader(raw, 12)
        r.i32()  # partition leader epoch
        magic = r.i8()
        crc = r.u32()
        attributes = r.i16()
        last_offset_delta = r.i32()
        base_ts = r.i64()
        max_ts = r.i64()
        producer_id = r.i64()
        r.i16()
        r.i32()
        count = r.i32()
        records: list[tuple[int, Record]] | None = None
        if attributes & 0x07 == 0 and magic == 2:
            records = []
            for _ in range(count):
                r.varint()  # length
                r.i8()
                ts_delta = r.varint()
                off_delta = r.varint()
                key = r.varbytes()
                value = r.varbytes()
                headers = []
                for _ in range(r.varint()):
                    hk = r.varbytes()
                    hv = r.varbytes()
                    headers.append(((hk or b"").decode(), hv))
                records.append((base_offset + off_delta, Record(key, value, headers, ts_delta)))
        batches.append(Batch(base_offset, length, magic, crc, attributes, last_offset_delta,
                             base_ts, max_ts, producer_id, count, raw, records))
        pos = end
    return batches


# ----------------------------------------------------------------------------- requests

def request_frame(api_key: int, version: int, correlation_id: int, body: bytes,
                  client_id: str | None = "bmq-tests") -> bytes:
    """Size-prefixed request with a v1 (non-flexible) request header."""
    payload = i16(api_key) + i16(version) + i32(correlation_id) + string(client_id) + body
    return i32(len(payload)) + payload


def produce_body(version: int, topic: str, partition: int, records: bytes, *, acks: int = -1,
                 timeout_ms: int = 10000) -> bytes:
    body = b""
    if version >= 3:
        body += string(None)  # transactional id
    body += i16(acks) + i32(timeout_ms)
    body += array([string(topic) + array([i32(partition) + nbytes(records)])])
    return body


def fetch_body(version: int, topic: str, partition: int, offset: int, *, max_wait_ms: int = 0,
               min_bytes: int = 1, max_bytes: int = 50 << 20,
               partition_max_bytes: int = 10 << 20) -> bytes:
    body = i32(-1) + i32(max_wait_ms) + i32(min_bytes)
    if version >= 3:
        body += i32(max_bytes)
    if version >= 4:
        body += i8(0)  # READ_UNCOMMITTED
    if version >= 7:
        body += i32(0) + i32(-1)  # no fetch session
    part = i32(partition)
    if version >= 9:
        part += i32(-1)  # current leader epoch unknown
    part += i64(offset)
    if version >= 5:
        part += i64(-1)  # log start offset (follower only)
    part += i32(partition_max_bytes)
    body += array([string(topic) + array([part])])
    if version >= 7:
        body += array([])  # forgotten topics
    if version >= 11:
        body += string("")  # rack id
    return body


def metadata_body(version: int, topics: Sequence[str] | None, *,
                  allow_auto_create: bool = False) -> bytes:
    if topics is None:
        body = array(None) if version >= 1 else array([])
    else:
        body = array([string(t) for t in topics])
    if version >= 4:
        body += i8(1 if allow_auto_create else 0)
    if version >= 8:
        body += i8(0) + i8(0)
    return body


def list_offsets_body(version: int, topic: str, partition: int, timestamp: int) -> bytes:
    body = i32(-1)
    if version >= 2:
        body += i8(0)
    part = i32(partition)
    if version >= 4:
        part += i32(-1)
    part += i64(timestamp)
    if version == 0:
        part += i32(1)
    body += array([string(topic) + array([part])])
    return body


def create_topics_body(version: int, topics: Iterable[tuple[str, int, int]], *,
                       configs: dict[str, str] | None = None, timeout_ms: int = 10000) -> bytes:
    items = []
    for name, partitions, rf in topics:
        items.append(string(name) + i32(partitions) + i16(rf) + array([])
                     + array([string(k) + string(v) for k, v in (configs or {}).items()]))
    body = array(items) + i32(timeout_ms)
    if version >= 1:
        body += i8(0)  # validate only
    return body


# ----------------------------------------------------------------------------- responses

@dataclass
class ProducePartitionResult:
    index: int
    error_code: int
    base_offset: int
    log_start_offset: int | None = None
    error_message: str | None = None


def parse_produce_response(version: int,
                           data: bytes) -> dict[tuple[str, int], ProducePartitionResult]:
    r = Reader(data)
    out: dict[tuple[str, int], ProducePartitionResult] = {}
    for _ in range(r.i32()):
        name = r.string() or ""
        for _ in range(r.i32()):
            res = ProducePartitionResult(r.i32(), r.i16(), r.i64())
            if version >= 2:
                r.i64()  # log append time
            if version >= 5:
                res.log_start_offset = r.i64()
            if version >= 8:
                r.array(lambda rr: (rr.i32(), rr.string()))
                res.error_message = r.string()
            out[(name, res.index)] = res
    return out


@dataclass
class FetchPartitionResult:
    index: int
    error_code: int
    high_watermark: int
    log_start_offset: int | None
    records: bytes | None


def parse_fetch_response(version: int, data: bytes) -> dict[tuple[str, int], FetchPartitionResult]:
    r = Reader(data)
    if version >= 1:
        r.i32()  # throttle
    if version >= 7:
        r.i16()
        r.i32()
    out: dict[tuple[str, int], FetchPartitionResult] = {}
    for _ in range(r.i32()):
        name = r.string() or ""
        for _ in range(r.i32()):
            index = r.i32()
            error = r.i16()
            hw = r.i64()
            lso = None
            if version >= 4:
                r.i64()  # last stable offset
            if version >= 5:
                lso = r.i64()
            if version >= 4:
                r.array(lambda rr: (rr.i64(), rr.i64()))
            if version >= 11:
                r.i32()
            records = r.nbytes()
            out[(name, index)] = FetchPartitionResult(index, error, hw, lso, records)
    return out


def parse_list_offsets_response(version: int,
                                data: bytes) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (error_code, offset)."""
    r = Reader(data)
    if version >= 2:
        r.i32()
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for _ in range(r.i32()):
        name = r.string() or ""
        for _ in range(r.i32()):
            index = r.i32()
            error = r.i16()
            if version == 0:
                offsets = r.array(lambda rr: rr.i64()) or []
                offset = offsets[0] if offsets else -1
            else:
                r.i64()
                offset = r.i64()
                if version >= 4:
                    r.i32()
            out[(name, index)] = (error, offset)
    return out


def parse_create_topics_response(version: int, data: bytes) -> dict[str, tuple[int, str | None]]:
    r = Reader(data)
    if version >= 2:
        r.i32()
    out: dict[str, tuple[int, str | None]] = {}
    for _ in range(r.i32()):
        name = r.string() or ""
        error = r.i16()
        message = r.string() if version >= 1 else None
        out[name] = (error, message)
    return out


def parse_api_versions_response(data: bytes) -> tuple[int, dict[int, tuple[int, int]]]:
    """(error_code, {api_key: (min, max)}) from the v0 body layout (a prefix of v1/v2)."""
    r = Reader(data)
    error = r.i16()
    keys: dict[int, tuple[int, int]] = {}
    for _ in range(r.i32()):
        key, lo, hi = r.i16(), r.i16(), r.i16()
        keys[key] = (lo, hi)
    return error, keys


def parse_metadata_topics(version: int, data: bytes) -> dict[str, tuple[int, int]]:
    """topic -> (error_code, partition count)."""
    r = Reader(data)
    if version >= 3:
        r.i32()
    for _ in range(r.i32()):  # brokers
        r.i32()
        r.string()
        r.i32()
        if version >= 1:
            r.string()
    if version >= 2:
        r.string()
    if version >= 1:
        r.i32()
    out: dict[str, tuple[int, int]] = {}
    for _ in range(r.i32()):
        error = r.i16()
        name = r.string() or ""
        if version >= 1:
            r.i8()
        count = 0
        for _ in range(r.i32()):
            count += 1
            r.i16()
            r.i32()
            r.i32()
            if version >= 7:
                r.i32()
            r.array(lambda rr: rr.i32())
            r.array(lambda rr: rr.i32())
            if version >= 5:
                r.array(lambda rr: rr.i32())
        if version >= 8:
            r.i32()
        out[name] = (error, count)
    return out


# ----------------------------------------------------------------------------- connection

class Disconnected(Exception):
    """The server closed the connection (FIN or RST)."""


class KafkaWire:
    """One blocking TCP connection speaking raw Kafka frames."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self._correlation = 0
        self._versions: dict[int, tuple[int, int]] | None = None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def __enter__(self) -> KafkaWire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def next_correlation_id(self) -> int:
        self._correlation += 1
        return self._correlation

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            try:
                chunk = self.sock.recv(min(n, 1 << 20))
            except ConnectionResetError as exc:
                raise Disconnected("connection reset by server") from exc
            if not chunk:
                raise Disconnected("connection closed by server")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._recv_exact(4))
        return self._recv_exact(size)

    def request(self, api_key: int, version: int, body: bytes) -> bytes:
        """Send one request; return the response body after the v0 response header."""
        cid = self.next_correlation_id()
        self.send_raw(request_frame(api_key, version, cid, body))
        frame = self.recv_frame()
        (got,) = struct.unpack_from(">i", frame)
        assert got == cid, f"correlation id mismatch: sent {cid}, got {got}"
        return frame[4:]

    def wait_disconnect(self, timeout: float = 5.0) -> bytes:
        """Read until the server closes; return any bytes it sent first.

        Raises AssertionError if the connection is still open after ``timeout``.
        """
        self.sock.settimeout(timeout)
        received = b""
        deadline = time.monotonic() + timeout
        try:
            while True:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"server kept the connection open for {timeout}s "
                        f"(received {len(received)} bytes: {received[:64]!r})")
                try:
                    chunk = self.sock.recv(65536)
                except ConnectionResetError:
                    return received
                except TimeoutError:
                    raise AssertionError(
                        f"server kept the connection open for {timeout}s "
                        f"(received {len(received)} bytes: {received[:64]!r})") from None
                if not chunk:
                    return received
                received += chunk
        finally:
            self.sock.settimeout(self.timeout)

    # -- helpers with version negotiation -------------------------------------------------
    def api_versions(self) -> dict[int, tuple[int, int]]:
        if self._versions is None:
            error, keys = parse_api_versions_response(self.request(API_VERSIONS, 0, b""))
            assert error == NONE, f"ApiVersions v0 error {error}"
            self._versions = keys
        return self._versions

    def version_for(self, api_key: int) -> int:
        versions = self.api_versions()
        assert api_key in versions, f"broker does not advertise api key {api_key}"
        lo, hi = versions[api_key]
        version = min(hi, NON_FLEXIBLE_MAX[api_key])
        assert version >= lo, (f"api key {api_key}: broker supports only v{lo}-v{hi}, "
                               f"no non-flexible version available for raw tests")
        return version

    def produce(self, topic: str, partition: int, records: bytes, *, acks: int = -1,
                version: int | None = None) -> ProducePartitionResult:
        v = self.version_for(PRODUCE) if version is None else version
        data = self.request(PRODUCE, v, produce_body(v, topic, partition, records, acks=acks))
        result = parse_produce_response(v, data)
        assert (topic, partition) in result, f"no result for {topic}/{partition}: {result}"
        return result[(topic, partition)]

    def fetch(self, topic: str, partition: int, offset: int, **kw: Any) -> FetchPartitionResult:
        v = self.version_for(FETCH)
        data = self.request(FETCH, v, fetch_body(v, topic, partition, offset, **kw))
        result = parse_fetch_response(v, data)
        assert (topic, partition) in result, f"no result for {topic}/{partition}: {result}"
        return result[(topic, partition)]

    def list_offset(self, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
        v = self.version_for(LIST_OFFSETS)
        data = self.request(LIST_OFFSETS, v, list_offsets_body(v, topic, partition, timestamp))
        return parse_list_offsets_response(v, data)[(topic, partition)]

    def create_topics(self, topics: Iterable[tuple[str, int, int]],
                      configs: dict[str, str] | None = None) -> dict[str, tuple[int, str | None]]:
        v = self.version_for(CREATE_TOPICS)
        data = self.request(CREATE_TOPICS, v, create_topics_body(v, topics, configs=configs))
        return parse_create_topics_response(v, data)

    def init_producer_id(self, transactional_id: str | None = None,
                         timeout_ms: int = 60000) -> tuple[int, int, int]:
        """(error_code, producer_id, producer_epoch)."""
        v = self.version_for(INIT_PRODUCER_ID)
        data = self.request(INIT_PRODUCER_ID, v, string(transactional_id) + i32(timeout_ms))
        r = Reader(data)
        r.i32()  # throttle
        return r.i16(), r.i64(), r.i16()

    def metadata(self, topics: Sequence[str] | None,
                 allow_auto_create: bool = False) -> dict[str, tuple[int, int]]:
        v = self.version_for(METADATA)
        data = self.request(METADATA, v, metadata_body(v, topics,
                                                       allow_auto_create=allow_auto_create))
        return parse_metadata_topics(v, data)

