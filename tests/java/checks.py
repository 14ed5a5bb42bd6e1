"""What the Java scenarios start from and what their results must be: topics and records
written with confluent-kafka before a run, and the checks of a run's results (reading back
with confluent-kafka where the Java client wrote). Shared by the tests on `bmq serve`, on a
cluster behind a proxy and over SASL_SSL; ``bootstrap`` is always a plaintext address for
confluent-kafka, the Java client may use another listener."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.groups.helpers import create_topic, unique
from tests.integration.helpers import Msg, consume, produce_all

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
GROUP_PARTITIONS, PER_PARTITION = 3, 20

# Called with a topic just created, before anything is written to it: on a cluster, waiting
# until its partitions have owners (``Cluster.wait_writable``).
Ready = Callable[[str], object]


def no_wait(topic: str) -> None:
    """On `bmq serve` a created topic is writable at once."""


def new_topic(bootstrap: str, prefix: str, partitions: int, ready: Ready) -> str:
    topic = unique(prefix)
    create_topic(bootstrap, topic, partitions)
    ready(topic)
    return topic


def hex_or_none(data: bytes | None) -> str | None:
    return None if data is None else data.hex()


def as_seen(msg: Msg) -> dict[str, Any]:
    """A record read by confluent-kafka in the form the Java programs report (Records.java)."""
    return {"offset": msg.offset, "key": hex_or_none(msg.key), "value": hex_or_none(msg.value),
            "headers": [[name, hex_or_none(value)] for name, value in msg.headers or []]}


# ------------------------------------------------------------------------------- producer

def producer_topics(bootstrap: str, scenarios: tuple[str, ...] = ("idempotent", "transactions",
                                                                    "codecs"),
                    ready: Ready = no_wait) -> dict[str, str]:
    """A topic for each producer scenario: the codecs' has a partition for each codec."""
    return {name: new_topic(bootstrap, f"java-{name}", len(CODECS) if name == "codecs" else 1,
                            ready) for name in scenarios}


def check_idempotent(bootstrap: str, topic: str, result: dict[str, Any]) -> None:
    assert result["offsets"] == list(range(300))
    read = consume(bootstrap, topic, expected=300)[0]
    assert [(m.offset, m.key, m.value) for m in read] == [
        (i, f"k{i}".encode(), f"idempotent-{i}".encode()) for i in range(300)]


def check_transactions(bootstrap: str, topic: str, result: dict[str, Any]) -> None:
    """Each transaction's records at the offsets the client was told (its marker after
    them); the zombie refused; read_committed sees the committed ones only; the group's offset
    is the committed transaction's, not the aborted one's."""
    assert result["committed"] == [0, 1, 2, 3, 4]
    assert result["aborted"] == [6, 7, 8, 9, 10]
    assert result["committed_again"] == [12, 13, 14, 15, 16]
    assert result["after_fencing"] == [18, 19]
    assert "ProducerFencedException" in result["fenced"], result["fenced"]
    committed = [*(f"committed-a{i}" for i in range(5)), *(f"committed-b{i}" for i in range(5)),
                 "after-fencing-0", "after-fencing-1"]
    read = consume(bootstrap, topic, isolation_level="read_committed")[0]
    assert [m.value.decode() for m in read if m.value is not None] == committed
    everything = consume(bootstrap, topic, isolation_level="read_uncommitted")[0]
    assert [m.value.decode() for m in everything if m.value is not None] == [
        *committed[:5], *(f"aborted-{i}" for i in range(5)), *committed[5:]]
    assert committed_offsets(bootstrap, result["group"], topic, 1) == [42]


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "broker.address.family": "v4"})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 15)
        return [tp.offset for tp in found]
    finally:
        consumer.close()


def check_codecs(bootstrap: str, topic: str, result: dict[str, Any]) -> None:
    """Each codec's records read back by librdkafka byte for byte: keys (some null), values
    (binary, empty, null), headers (a repeated name, a null value), at the reported offsets."""
    assert list(result) == list(CODECS)
    read = consume(bootstrap, topic, partitions=range(len(CODECS)), expected=60 * len(CODECS))
    for partition, codec in enumerate(CODECS):
        assert [as_seen(m) for m in read[partition]] == result[codec], codec


def check_steady(bootstrap: str, topic: str, result: dict[str, Any]) -> None:
    """Every send succeeded, and the partition holds each record once, in order, at the
    offsets the producer was told."""
    assert result["errors"] == []
    read = consume(bootstrap, topic, expected=4000)[0]
    assert [m.value for m in read] == [f"steady-{i}".encode() for i in range(4000)]
    assert result["offsets"] == [m.offset for m in read]


# ------------------------------------------------------------------------------- consumer

def group_topic(bootstrap: str, ready: Ready = no_wait) -> tuple[str, list[Msg]]:
    """A topic of 3 partitions, 20 records each with a key, a header and a timestamp one
    second apart (starting a minute ago), as the group scenarios' input."""
    topic = new_topic(bootstrap, "java-group", GROUP_PARTITIONS, ready)
    base = int(time.time() * 1000) - 60_000
    records = [Msg(topic, p, i, f"k{p}-{i}".encode(), f"p{p}-{i}".encode(),
                   [("n", str(i).encode())], 1, base + i * 1000)
               for i in range(PER_PARTITION) for p in range(GROUP_PARTITIONS)]
    produce_all(bootstrap, topic, ({"partition": m.partition, "key": m.key, "value": m.value,
                                    "headers": m.headers, "timestamp": m.timestamp}
                                   for m in records))
    return topic, records


def described(msg: Msg) -> dict[str, Any]:
    """A record as Records.java describes it."""
    return {"partition": msg.partition, **as_seen(msg), "timestamp": msg.timestamp}


def check_read_together(bootstrap: str, topic: str, records: list[Msg],
                        result: dict[str, Any]) -> None:
    """Two members split the partitions; together they read every record exactly once;
    each partition's late records went to the member that owns that partition; the group's
    committed offsets are at the end of each partition."""
    first, second = result["split_after_reading"]
    assert sorted(first + second) == list(range(GROUP_PARTITIONS)) and first and second
    members = (result["a"], result["b"])
    read = [r for member in members for r in member["records"]]
    counts = Counter((r["partition"], r["offset"]) for r in read)
    assert max(counts.values()) == 1, [k for k, n in counts.items() if n > 1]
    expected = sorted((described(m) for m in records),
                      key=lambda r: (r["partition"], r["offset"]))
    early = sorted((r for r in read if r["value"] != b"late".hex()),
                   key=lambda r: (r["partition"], r["offset"]))
    assert early == expected
    for member in members:
        late = {r["partition"] for r in member["records"] if r["value"] == b"late".hex()}
        assert late == set(member["assignment"]), member["assignment"]
    # Committed after the last record read (other scenarios on the topic may write later ones).
    assert committed_offsets(bootstrap, result["group"], topic, GROUP_PARTITIONS) == [
        max(o for q, o in counts if q == p) + 1 for p in range(GROUP_PARTITIONS)]


def check_static_members(result: dict[str, Any], same_generation: bool) -> None:
    """The restarted member (same group.instance.id) has its partitions back; the other kept
    its own and saw no rebalance."""
    assert result["a_before"] and result["b_before"]
    assert result["b_after"] == result["b_before"]
    assert result["a_after"] == result["a_before"]
    assert result["a_revoked_after_restart"] == []
    if same_generation:
        assert result["a_generation_after"] == result["a_generation_before"]


def check_regex(topic: str, result: dict[str, Any]) -> None:
    """Each regex consumer read the topic it matched at the start, then the record of the
    topic created after, which it was assigned too."""
    for kind in ("pattern", "subscription-pattern"):
        seen, created = result[kind], f"{topic}-{kind}"
        assert seen["records_by_topic"] == {topic: seen["records_at_start"], created: 1}, kind
        assert seen["assigned_topics"] == sorted([topic, created]), kind


def check_seek(result: dict[str, Any]) -> None:
    end = result["end"]
    assert (result["beginning"], end) == (0, PER_PARTITION)
    assert result["after_seek_5"] == 5
    assert result["after_seek_last"] == end - 1
    assert result["position_at_beginning"] == 0 and result["first_from_beginning"] == 0
    assert result["position_at_end"] == end
    assert "OffsetOutOfRangeException" in result["past_end_without_reset"]
    assert result["past_end_reset_to_latest"] == end


def check_offsets_for_times(records: list[Msg], result: dict[str, Any]) -> None:
    """The earliest offset whose timestamp is at or after each query, with that timestamp;
    none past the last record."""
    partition0 = [m for m in records if m.partition == 0]
    assert result["first_timestamp"] == partition0[0].timestamp
    for answer in result["answers"]:
        later = [m for m in partition0 if m.timestamp >= answer["query"]]
        expected = (later[0].offset, later[0].timestamp) if later else (None, None)
        assert (answer["offset"], answer["timestamp"]) == expected, answer


class OpenTransaction:
    """A one-partition topic with: a plain record, a committed transaction, an aborted one,
    another plain record, and a transaction left open (until ``close``)."""

    COMMITTED = ("plain-0", "c-0", "c-1", "c-2", "plain-1")
    ABORTED = ("a-0", "a-1", "a-2")
    OPEN = ("open-0", "open-1")

    def __init__(self, bootstrap: str, ready: Ready = no_wait) -> None:
        self.topic = new_topic(bootstrap, "java-rc", 1, ready)
        plain = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
        self.producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                                  "transactional.id": unique("java-rc-txn")})
        self.producer.init_transactions(15)
        self._write(plain, self.COMMITTED[:1])
        self._transaction(self.COMMITTED[1:4], commit=True)
        self._transaction(self.ABORTED, commit=False)
        self._write(plain, self.COMMITTED[4:])
        self.producer.begin_transaction()
        self._write(self.producer, self.OPEN)

    def _write(self, producer: Producer, values: tuple[str, ...]) -> None:
        for value in values:
            producer.produce(self.topic, value=value.encode(), partition=0)
        assert producer.flush(15) == 0

    def _transaction(self, values: tuple[str, ...], commit: bool) -> None:
        self.producer.begin_transaction()
        self._write(self.producer, values)
        if commit:
            self.producer.commit_transaction(15)
        else:
            self.producer.abort_transaction(15)

    def close(self) -> None:
        self.producer.abort_transaction(15)


def check_read_committed(result: dict[str, Any]) -> None:
    """read_committed: the committed and plain records, never an aborted or open one, and the
    end is the last stable offset (the open transaction's first record); read_uncommitted
    reads everything to the high watermark. Offsets: plain 0, c 1-3, marker 4, a 5-7, marker
    8, plain 9, open 10-11."""
    committed, uncommitted = result["read_committed"], result["read_uncommitted"]
    assert committed["values"] == list(OpenTransaction.COMMITTED)
    assert committed["end_offsets"] == {"0": 10}
    assert uncommitted["values"] == [*OpenTransaction.COMMITTED[:4], *OpenTransaction.ABORTED,
                                     "plain-1", *OpenTransaction.OPEN]
    assert uncommitted["end_offsets"] == {"0": 12}


# ---------------------------------------------------------------------------------- share

def share_topic(bootstrap: str, ready: Ready = no_wait) -> str:
    """One partition with v0 .. v9."""
    topic = new_topic(bootstrap, "java-share", 1, ready)
    produce_all(bootstrap, topic, ({"partition": 0, "value": f"v{i}".encode()}
                                   for i in range(10)))
    return topic


def check_acknowledge(result: dict[str, Any]) -> None:
    """Every record delivered once and accepted, except v2 (released at its first delivery,
    delivered again with delivery count 2, accepted) and v5 (rejected, never again); the
    acknowledgements committed without error; a new consumer of the group gets only the
    record written after."""
    seen = [(d["offset"], d["delivery_count"], d["acknowledged"]) for d in result["deliveries"]]
    expected = [(o, 1, "REJECT" if o == 5 else "RELEASE" if o == 2 else "ACCEPT")
                for o in range(10)] + [(2, 2, "ACCEPT")]
    assert sorted(seen) == sorted(expected), seen
    assert seen.index((2, 2, "ACCEPT")) > seen.index((2, 1, "RELEASE"))
    assert result["commit_errors"] == []
    assert [(d["offset"], d["text"], d["delivery_count"]) for d in result["new_consumer"]] == [
        (10, "after", 1)]


def check_implicit(result: dict[str, Any]) -> None:
    assert sorted((d["offset"], d["delivery_count"]) for d in result["deliveries"]) == [
        (o, 1) for o in range(10)]
    assert [(d["offset"], d["delivery_count"]) for d in result["new_consumer"]] == [(10, 1)]


def check_renew(result: dict[str, Any]) -> None:
    """RENEW needs ShareAcknowledge v2 (KIP-1222), which BMQ does not serve: the client's
    commit reports UNSUPPORTED_VERSION for the partition (an error, not a hang)."""
    assert result["renewed_offset"] == 0
    assert len(result["commit_results"]) == 1
    assert "UnsupportedVersionException" in result["commit_results"][0], result
