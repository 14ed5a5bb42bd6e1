"""Index Query: the records of a topic whose indexed fields have given values.

For each partition the index chunks name the batches that may match every term (the
intersection of the terms' lookups); only those batches are read, and every record in them is
checked against every term (hash collisions and batch neighbours never leak through). The part
of the log the index does not cover yet (newer than the builder's progress) is scanned batch by
batch, so an answer is complete up to the last stable offset the reader sees, whatever the
builder's progress. Answers are read_committed, as a Kafka consumer's at isolation level 1:
nothing at or past the last stable offset (open transactions), no record of an aborted
transaction (the partition's aborted-transaction index, as Fetch answers with it). Any
process that can read the partition from the shared storage can answer: the owner reads its
own log, other brokers and proxies a ``LogReader``.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice
from typing import Any, Protocol

from bmq.field_index.chunk import value_hash
from bmq.field_index.extract import records_hashing_to
from bmq.field_index.fields import (
    INDEX_FIELDS,
    Field,
    FieldSpecError,
    MalformedValue,
    field_text,
    parse_fields,
    parse_value,
)
from bmq.field_index.store import ChunkFile, IndexStore, chain
from bmq.metadata.topics import TopicRegistry
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.record_codec import Record, RecordDecodeError
from bmq.protocol.records import (
    HEADER_SIZE,
    iter_batches,
    read_header,
)
from bmq.storage.producer_state import AbortedBatches, AbortedTxn

DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000
SCAN_BYTES = 1 << 20
PARALLEL_PARTITIONS = 8
_RETRIES = 3


class QueryError(ValueError):
    """A query that cannot be answered as asked (HTTP 400, the CLI's usage error)."""


class UnknownTopic(QueryError):
    """No such topic (HTTP 404)."""


class ReadableLog(Protocol):
    """What a query reads a partition through: a ``PartitionLog`` or a ``LogReader``."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    def last_stable_offset(self) -> int: ...

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]: ...

    def read(self, offset: int, max_bytes: int) -> bytes | memoryview: ...


@dataclass(frozen=True, slots=True)
class Term:
    field: Field
    text: bytes


@dataclass(frozen=True, slots=True)
class Query:
    terms: list[Term]
    start_ms: int | None = None
    end_ms: int | None = None
    limit: int = DEFAULT_LIMIT

    def matches(self, record: Record) -> bool:
        if self.start_ms is not None and record.timestamp < self.start_ms:
            return False
        if self.end_ms is not None and record.timestamp > self.end_ms:
            return False
        document: object = None
        if any(t.field.kind == "json" for t in self.terms):
            try:
                document = parse_value(record.value)
            except MalformedValue:
                return False
        return all(field_text(t.field, record, document) == t.text for t in self.terms)


def parse_time(text: str, what: str) -> int:
    """Milliseconds since the epoch, or an ISO-8601 time (UTC unless it says otherwise)."""
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise QueryError(f"{what}: {text!r} is neither milliseconds since the epoch nor an "
                         "ISO-8601 time such as 2026-11-28T12:00:00Z") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def parse_query(fields: Sequence[Field], where: Sequence[str], start: str | None = None,
                end: str | None = None, limit: str | None = None) -> Query:
    """A query from its parts as the CLI and the HTTP endpoint take them."""
    if not where:
        raise QueryError("at least one where term is needed, such as where=order_id=42")
    by_name = {f.name: f for f in fields}
    terms = []
    for term in where:
        name, sep, value = term.partition("=")
        if not sep or not name:
            raise QueryError(f"where {term!r}: expected FIELD=VALUE")
        field = by_name.get(name.strip())
        if field is None:
            indexed = ", ".join(by_name) or "none"
            raise QueryError(f"where {term!r}: {name.strip()!r} is not an indexed field "
                             f"(indexed: {indexed})")
        terms.append(Term(field, value.encode()))
    count = DEFAULT_LIMIT
    if limit is not None:
        if not limit.isdigit() or not 1 <= int(limit) <= MAX_LIMIT:
            raise QueryError(f"limit {limit!r}: expected a number from 1 to {MAX_LIMIT}")
        count = int(limit)
    start_ms = None if start is None else parse_time(start, "from")
    end_ms = None if end is None else parse_time(end, "to")
    if start_ms is not None and end_ms is not None and end_ms < start_ms:
        raise QueryError("to is before from")
    return Query(terms, start_ms, end_ms, count)


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode()


def record_json(partition: int, record: Record) -> dict[str, Any]:
    return {"partition": partition, "offset": record.offset, "timestamp": record.timestamp,
            "key": _text(record.key), "value": _text(record.value),
            "headers": [[name, _text(value)] for name, value in record.headers]}


@dataclass(frozen=True, slots=True)
class PartitionProgress:
    partition: int
    log_start_offset: int
    high_watermark: int
    indexed_up_to: int
    records: int
    malformed: int

    def to_json(self) -> dict[str, Any]:
        return {"partition": self.partition, "log_start_offset": self.log_start_offset,
                "high_watermark": self.high_watermark, "indexed_up_to": self.indexed_up_to,
                "records_indexed": self.records, "malformed_values": self.malformed}


class QueryService:
    """Answers queries and progress questions from the shared storage; ``open_log`` gives the
    log of a partition as this process can read it."""

    def __init__(self, store: IndexStore, topics: TopicRegistry,
                 open_log: Callable[[str, int], ReadableLog]) -> None:
        self._store = store
        self._topics = topics
        self._open_log = open_log
        self._pool = ThreadPoolExecutor(PARALLEL_PARTITIONS, thread_name_prefix="bmq-query")

    def fields(self, topic: str) -> tuple[int, list[Field]]:
        """(partition count, indexed fields) of ``topic``."""
        info = self._topics.get(topic)
        if info is None:
            raise UnknownTopic(f"unknown topic {topic!r}")
        try:
            return info.partitions, parse_fields(info.configs.get(INDEX_FIELDS, ""))
        except FieldSpecError as error:    # never stored: the config is validated
            raise QueryError(f"{INDEX_FIELDS} of {topic}: {error}") from None

    def query(self, topic: str, where: Sequence[str], start: str | None = None,
              end: str | None = None, limit: str | None = None) -> list[dict[str, Any]]:
        partitions, fields = self.fields(topic)
        if not fields:
            raise QueryError(f"topic {topic!r} has no indexed fields (bmq index create "
                             f"{topic} --field FIELD)")
        query = parse_query(fields, where, start, end, limit)

        def first(partition: int) -> list[Record]:
            return list(islice(self._partition(topic, partition, query), query.limit))

        # Partitions are looked up side by side, ``PARALLEL_PARTITIONS`` at a time (on an
        # object store each is a few requests), each up to the limit; the answer is the first
        # ``limit`` records in partition order.
        found: list[dict[str, Any]] = []
        for group in range(0, partitions, PARALLEL_PARTITIONS):
            indexes = range(group, min(group + PARALLEL_PARTITIONS, partitions))
            for partition, records in zip(indexes, self._pool.map(first, indexes), strict=True):
                found.extend(record_json(partition, r)
                             for r in records[:query.limit - len(found)])
            if len(found) >= query.limit:
                break
        return found

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def progress(self, topic: str) -> list[PartitionProgress]:
        partitions, fields = self.fields(topic)
        result = []
        for partition in range(partitions):
            source = self._open_log(topic, partition)
            start = source.log_start_offset
            upto = source.high_watermark
            records = malformed = 0
            for field in fields:    # a field without chunks has indexed nothing past the start
                files = chain(self._store.files(topic, partition, field))
                upto = min(upto, max(files[-1].end, start) if files else start)
                records, malformed = self._store.totals(topic, partition, field, files)
            result.append(PartitionProgress(partition, source.log_start_offset,
                                            source.high_watermark, upto, records, malformed))
        return result

    def _partition(self, topic: str, partition: int, query: Query) -> Iterator[Record]:
        source = self._open_log(topic, partition)
        end = source.last_stable_offset()
        (lo, hi), batches = self._candidates_retried(topic, partition, query)
        start = source.log_start_offset
        aborted = AbortedBatches(lambda: source.aborted_transactions(start, end))
        if lo > start:
            yield from self._scan(source, query, aborted, start, min(lo, end))
        # Batches from the log start on, and the last one before it (it may hold offsets past
        # the start: DeleteRecords moves the start inside a batch).
        below = [offset for offset in batches if offset < start]
        straddling = [max(below)] if below else []
        for offset in sorted([offset for offset in batches if offset >= start] + straddling):
            if offset < min(hi, end):
                yield from self._batch(source, query, aborted, offset, start)
        yield from self._scan(source, query, aborted, max(hi, start), end)

    def _candidates_retried(self, topic: str, partition: int, query: Query
                            ) -> tuple[tuple[int, int], set[int]]:
        for _ in range(_RETRIES - 1):
            with contextlib.suppress(FileNotFoundError):   # a chunk merged away: list again
                return self._candidates(topic, partition, query)
        return self._candidates(topic, partition, query)

    def _candidates(self, topic: str, partition: int, query: Query
                    ) -> tuple[tuple[int, int], set[int]]:
        """([lo, hi) covered by every term's index, batch offsets there that may match)."""
        lo, hi = 0, 1 << 62
        chains: list[list[ChunkFile]] = []
        for term in query.terms:
            files = chain(self._store.files(topic, partition, term.field))
            if not files:
                return (0, 0), set()
            lo, hi = max(lo, files[0].start), min(hi, files[-1].end)
            chains.append(files)
        if hi <= lo:
            return (0, 0), set()
        batches: set[int] | None = None
        for term, files in zip(query.terms, chains, strict=True):
            useful = [f for f in files if f.end > lo and f.start < hi]
            found = self._store.lookup(topic, partition, term.field, useful, term.text)
            batches = found if batches is None else batches & found
            if not batches:
                break
        return (lo, hi), batches or set()

    def _batch(self, source: ReadableLog, query: Query, aborted: AbortedBatches,
               offset: int, log_start: int) -> Iterator[Record]:
        """The matching records of the batch at ``offset`` (those from ``log_start`` on)."""
        at = max(offset, log_start)
        try:
            data = source.read(at, 1)
        except KafkaError as error:       # retention deleted it meanwhile
            if error.code == ErrorCode.OFFSET_OUT_OF_RANGE:
                return
            raise
        if len(data) < HEADER_SIZE or read_header(data).base_offset != offset:
            return
        yield from self._records(data, query, aborted, at, offset + 1)

    def _scan(self, source: ReadableLog, query: Query, aborted: AbortedBatches, start: int,
              end: int) -> Iterator[Record]:
        offset = start
        while offset < end:
            try:
                data = source.read(offset, SCAN_BYTES)
            except KafkaError as error:
                if error.code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    return
                raise
            last = offset
            yield from self._records(data, query, aborted, offset, end)
            for _, header in iter_batches(data):
                last = header.next_offset
            if last <= offset:
                return
            offset = last

    def _records(self, data: bytes | memoryview, query: Query, aborted: AbortedBatches,
                 start: int, end: int) -> Iterator[Record]:
        """Records of the batches in ``data`` that begin in ``[start, end)``, not aborted,
        that match."""
        view = memoryview(data)
        fields = [t.field for t in query.terms]
        hashes = [value_hash(t.text) for t in query.terms]
        for pos, header in iter_batches(view):
            if header.base_offset >= end:
                return
            if header.is_control or header.next_offset <= start or header in aborted:
                continue
            if query.start_ms is not None and header.max_timestamp < query.start_ms:
                continue
            with contextlib.suppress(RecordDecodeError, ValueError):
                for record in records_hashing_to(view[pos:pos + header.size], header, fields,
                                                 hashes):
                    if record.offset >= start and query.matches(record):
                        yield record


def query_params(params: Mapping[str, list[str]]) -> dict[str, Any]:
    """The keyword arguments of ``QueryService.query`` from URL query parameters."""
    unknown = sorted(set(params) - {"where", "from", "to", "limit"})
    if unknown:
        raise QueryError(f"unknown parameter {unknown[0]!r} (where, from, to, limit)")
    for name in ("from", "to", "limit"):
        if len(params.get(name, [])) > 1:
            raise QueryError(f"{name} given twice")
    return {"where": params.get("where", []), "start": params.get("from", [None])[0],
            "end": params.get("to", [None])[0], "limit": params.get("limit", [None])[0]}
