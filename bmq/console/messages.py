"""The message browser: a page of one partition's records from an offset, read with a
confluent-kafka Consumer assigned to the partition (no group, nothing committed), and how a
key or value is shown (text, pretty JSON, hex)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from confluent_kafka import Consumer, KafkaException, TopicPartition

from bmq.console.admin import ConsoleError

MAX_PAGE = 1000
# The bytes of a key, value or header shown; the rest is summed up as its length.
SHOWN_BYTES = 4096
FORMATS = ("text", "json", "hex")
# A page is read until the partition's end offset is reached; this bounds the wait when the
# owner is slow or the end offset was stale.
READ_DEADLINE_S = 10.0


@dataclass(frozen=True)
class Message:
    offset: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]

    @property
    def time(self) -> str:
        if self.timestamp_ms is None or self.timestamp_ms < 0:
            return ""
        moment = datetime.fromtimestamp(self.timestamp_ms / 1000, tz=UTC)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_number(text: str | None, what: str, default: int, low: int = 0,
                 high: int | None = None) -> int:
    """A whole number a user typed as ``what`` (offset, count, partition), ``default`` when
    blank; ConsoleError naming ``what`` when it is not one, or out of [low, high]."""
    if text is None or not text.strip():
        return default
    try:
        number = int(text.strip())
    except ValueError:
        raise ConsoleError(f"{what} must be a whole number, got {text.strip()!r}") from None
    if high is not None and not low <= number <= high:
        raise ConsoleError(f"{what} must be between {low} and {high}, got {number}")
    if number < low:
        raise ConsoleError(f"{what} must be {low} or more, got {number}")
    return number


def parse_time(text: str) -> int:
    """A time a user typed (ISO 8601; UTC unless it says otherwise) in ms since the epoch."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConsoleError("time must be ISO 8601 such as 2026-11-30T17:00:00Z, got "
                           f"{text.strip()!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def render(data: bytes | None, form: str) -> str:
    """``data`` as the browser's chosen format shows it (JSON falls back to text); past
    SHOWN_BYTES only its beginning, saying how long it is (a page of 1,000 large records
    would otherwise be a gigabyte of HTML)."""
    if data is None:
        return "null"
    cut = data[:SHOWN_BYTES]
    more = f"\n… {len(data):,} bytes in all" if len(data) > SHOWN_BYTES else ""
    if form == "hex":
        return cut.hex(" ") + more
    text = cut.decode("utf-8", errors="replace")
    if form == "json" and not more:
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    return text + more


def _bytes(data: str | bytes | None) -> bytes | None:
    return data.encode() if isinstance(data, str) else data


def _headers(headers: object) -> list[tuple[str, bytes | None]]:
    pairs = headers.items() if isinstance(headers, dict) else headers or []
    return [(str(key), _bytes(value)) for key, value in pairs]  # type: ignore[attr-defined]


def read_page(config: dict[str, str | int | float | bool], topic: str, partition: int,
              start: int, end: int, count: int) -> list[Message]:
    """Up to ``count`` records of ``topic[partition]`` from offset ``start``, stopping at
    ``end`` (the partition's end offset when the page was asked for)."""
    if start >= end:
        return []
    consumer = Consumer({**config, "group.id": "bmq-console-browser",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "auto.offset.reset": "earliest",
                         # a page at a time: fetch no more than it needs ahead
                         "fetch.max.bytes": 8 * 1024 * 1024,
                         "queued.max.messages.kbytes": 16 * 1024})
    messages: list[Message] = []
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + READ_DEADLINE_S
        while len(messages) < count and time.monotonic() < deadline:
            for record in consumer.consume(min(500, count - len(messages)), timeout=0.5):
                error = record.error()
                if error is not None:
                    if error.code() == error._PARTITION_EOF:
                        return messages
                    raise ConsoleError(f"cannot read {topic}[{partition}]: {error.str()}")
                offset = record.offset()
                if offset is None or offset >= end:
                    return messages
                kind, stamp = record.timestamp()
                messages.append(Message(offset, stamp if kind else None, _bytes(record.key()),
                                        _bytes(record.value()), _headers(record.headers())))
                if offset + 1 >= end or len(messages) >= count:
                    return messages
    except KafkaException as error:
        raise ConsoleError(f"cannot read {topic}[{partition}]: {error.args[0].str()}") from error
    finally:
        consumer.close()
    return messages
