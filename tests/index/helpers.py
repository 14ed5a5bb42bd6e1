"""What the Index Query tests share: JSON records produced by confluent-kafka (remembering
where each landed), the HTTP endpoint, and waiting for the index to catch up."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Producer

MALFORMED = b"{not json"


@dataclass(frozen=True)
class Sent:
    number: int
    partition: int
    offset: int


def order_value(i: int) -> bytes:
    """Order ``i``: its id a number for odd i and a string for even i (both match as text)."""
    return json.dumps({"order_id": i if i % 2 else str(i), "user": {"id": i % 13}}).encode()


def produce_orders(bootstrap: str, topic: str, numbers: range, malformed: int = 0
                   ) -> dict[int, Sent]:
    """Orders ``numbers`` with key ``k{i % 50}`` and header ``trace=t{i}``, then ``malformed``
    values that are not JSON (numbered -1, -2, ...); where each one landed."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "batch.size": 16384,
                         "enable.idempotence": True})
    sent: dict[int, Sent] = {}

    def delivered(number: int) -> Any:
        def report(error: Any, message: Any) -> None:
            assert error is None, error
            sent[number] = Sent(number, message.partition(), message.offset())
        return report

    for i in numbers:
        producer.produce(topic, key=f"k{i % 50}", value=order_value(i),
                         headers=[("trace", f"t{i}".encode())], on_delivery=delivered(i))
        producer.poll(0)
    for j in range(1, malformed + 1):
        producer.produce(topic, key=b"bad", value=MALFORMED, on_delivery=delivered(-j))
    assert producer.flush(30) == 0
    assert len(sent) == len(numbers) + malformed
    return sent


def http_get(port: int, path: str, params: list[tuple[str, str]] | None = None
             ) -> tuple[int, bytes]:
    url = f"http://127.0.0.1:{port}{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def query(port: int, topic: str, *where: str, limit: int = 10_000) -> list[dict[str, Any]]:
    status, body = http_get(port, f"/topics/{topic}/query",
                            [("where", w) for w in where] + [("limit", str(limit))])
    assert status == 200, body
    return [json.loads(line) for line in body.splitlines()]


def positions(records: list[dict[str, Any]]) -> set[tuple[int, int]]:
    return {(r["partition"], r["offset"]) for r in records}


def progress(port: int, topic: str) -> list[dict[str, Any]]:
    status, body = http_get(port, f"/topics/{topic}/index")
    assert status == 200, body
    partitions: list[dict[str, Any]] = json.loads(body)["partitions"]
    return partitions


def wait_indexed(port: int, topic: str, total: int, timeout: float = 60) -> list[dict[str, Any]]:
    """Wait until every partition is indexed up to its high watermark, ``total`` records."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            parts = progress(port, topic)
        except OSError:
            parts = []
        if parts and sum(p["high_watermark"] for p in parts) >= total and all(
                p["indexed_up_to"] == p["high_watermark"] for p in parts):
            return parts
        assert time.monotonic() < deadline, f"not indexed after {timeout}s: {parts}"
        time.sleep(0.2)
