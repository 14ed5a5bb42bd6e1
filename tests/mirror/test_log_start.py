"""Source partitions that do not hold every offset from 0 are mirrored at the same offsets: a
head deleted (DeleteRecords, retention) before the mirror started, a DeleteRecords while it
runs, and a compacted topic's gaps. A consumer reading either side gets the same records at
the same offsets, from the same log start."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from confluent_kafka import KafkaError, Producer

from tests.conftest import BrokerFactory, BrokerProcess, make_topic_name
from tests.integration.compaction import COMPACTED, updates
from tests.mirror.conftest import MirrorFactory, MirrorProcess, wait_until
from tests.mirror.helpers import create, delete_records, produce, records, watermarks

pytestmark = pytest.mark.timeout(120)

@dataclass
class Prepared:
    """The source's topics, each written and trimmed before the mirror started."""

    source: BrokerProcess
    target: BrokerProcess
    mirror: MirrorProcess
    trimmed: str        # DeleteRecords: partition 0 from 45 (within a batch), 1 from its end
    retained: str       # retention deleted its sealed segments
    compacted: str      # the log cleaner left gaps


def delivered(error: KafkaError | None, _: object) -> None:
    assert error is None, error


def produce_in_batches(bootstrap: str, topic: str, count: int, partitions: int,
                       batch: int) -> None:
    """``produce``'s records, ``batch`` at a time (each flushed before the next)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, key=f"k{i}".encode(), value=f"value {i}".encode(),
                         partition=i % partitions, headers=[("n", str(i).encode())],
                         timestamp=1_700_000_000_000 + i, on_delivery=delivered)
        if i % batch == batch - 1:
            producer.flush(20)
    assert producer.flush(20) == 0


def trim(bootstrap: str) -> str:
    topic = make_topic_name("trimmed")
    create(bootstrap, topic, 2)
    produce_in_batches(bootstrap, topic, 200, 2, 20)    # batches of 10 records a partition
    delete_records(bootstrap, topic, {0: 45, 1: 100})
    assert watermarks(bootstrap, topic, 2) == [(45, 100), (100, 100)]
    return topic


def retain(bootstrap: str) -> str:
    """Records of 2023 (``produce``'s timestamps), an hour of retention: every sealed segment
    goes at the source's next retention check."""
    topic = make_topic_name("retained")
    create(bootstrap, topic, 1, **{"segment.bytes": "4096", "retention.ms": "3600000"})
    produce_in_batches(bootstrap, topic, 400, 1, 50)
    return topic


def compact(bootstrap: str) -> str:
    topic = make_topic_name("compacted")
    create(bootstrap, topic, 1, **COMPACTED)
    items, _ = updates(1500, 40, 5)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, item in enumerate(items):
        producer.produce(topic, key=item["key"], value=item["value"],
                         headers=[("n", str(i).encode())], timestamp=1_700_000_000_000 + i,
                         on_delivery=delivered)
        if i % 100 == 99:   # batches well within the topic's 16 KiB segments
            producer.flush(20)
    assert producer.flush(20) == 0
    return topic


@pytest.fixture(scope="module")
def prepared(module_broker_factory: BrokerFactory,
             module_mirror_factory: MirrorFactory) -> Prepared:
    # A source whose retention and log cleaner run at once.
    source = module_broker_factory(config={"log_retention_check_interval_ms": 200,
                                           "log_cleaner_backoff_ms": 200})
    target = module_broker_factory(config={"auto_create_topics_enable": False})
    trimmed, retained, compacted = (make(source.bootstrap) for make in (trim, retain, compact))

    def trimmed_by_retention_and_cleaner() -> bool:
        start, _ = (watermarks(source.bootstrap, retained, 1) or [(0, 0)])[0]
        first, last = (watermarks(source.bootstrap, compacted, 1) or [(0, 0)])[0]
        return start > 0 and len(records(source.bootstrap, compacted, 1)) < (last - first) / 2

    wait_until(trimmed_by_retention_and_cleaner, 30,
               "the source's retention deleted a head and its cleaner left gaps")
    mirror = module_mirror_factory(source, target, "--topic", trimmed, "--topic", retained,
                                   "--topic", compacted)
    return Prepared(source, target, mirror, trimmed, retained, compacted)


def same_on_both(prepared: Prepared, topic: str, partitions: int) -> None:
    source, target = prepared.source, prepared.target
    wait_until(lambda: watermarks(target.bootstrap, topic, partitions)
               == watermarks(source.bootstrap, topic, partitions), 30,
               "the target's log starts and ends are the source's", prepared.mirror.log_text)
    assert records(target.bootstrap, topic, partitions) == \
        records(source.bootstrap, topic, partitions)


def test_a_head_deleted_before_mirroring_and_after_is_deleted_on_the_target(
        prepared: Prepared) -> None:
    """Partition 0 starts within a batch, partition 1 has nothing from its end on: the target
    starts each where the source does. Then a DeleteRecords on the source moves the target's
    log start too, and what is produced next is mirrored after."""
    source, topic = prepared.source, prepared.trimmed
    same_on_both(prepared, topic, 2)
    delete_records(source.bootstrap, topic, {0: 70})
    produce(source.bootstrap, topic, 20, 2, start=200)
    same_on_both(prepared, topic, 2)
    assert watermarks(prepared.target.bootstrap, topic, 2) == [(70, 110), (100, 110)]


def test_a_head_deleted_by_retention_is_mirrored_from_the_log_start(prepared: Prepared) -> None:
    same_on_both(prepared, prepared.retained, 1)


def test_a_compacted_topic_is_mirrored_with_its_gaps(prepared: Prepared) -> None:
    same_on_both(prepared, prepared.compacted, 1)
