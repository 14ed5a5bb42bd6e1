"""``__transaction_state`` is compacted, as Kafka's: the log cleaner keeps each transactional
id's last state, so the log stays about the number of ids, not of transactions, and a broker
replaying the cleaned log after a restart knows every id's producer id and epoch."""

from __future__ import annotations

from typing import Any

from bmq.protocol.errors import ErrorCode
from tests.integration.helpers import consume, create_topic, wait_until
from tests.transactions.conftest import TXN_CONFIG
from tests.transactions.helpers import described, read_values, txn_producer

IDS = [f"compacted-{i}" for i in range(4)]
TRANSACTIONS = 80       # per id: 3 records each (Ongoing, PrepareCommit, CompleteCommit)
STATE_SEGMENT_BYTES = 8192
RECORDS_PER_SEGMENT = 63
COMPACTED_STATE = {**TXN_CONFIG, "transaction_state_log_num_partitions": 1,
                   "transaction_state_log_segment_bytes": STATE_SEGMENT_BYTES,
                   "log_cleaner_backoff_ms": 200}


def _state_records(bootstrap: str) -> int:
    """How many records a consumer reads from ``__transaction_state`` (clients may read it)."""
    return len(consume(bootstrap, "__transaction_state")[0])


def test_the_transaction_log_is_compacted_and_replays_every_id(broker_factory: Any) -> None:
    broker = broker_factory(config=COMPACTED_STATE)
    create_topic(broker.bootstrap, "paid", partitions=1)
    for txn_id in IDS:
        producer = txn_producer(broker.bootstrap, txn_id)
        producer.init_transactions(30)
        for i in range(TRANSACTIONS):
            producer.begin_transaction()
            producer.produce("paid", f"{txn_id}/{i}".encode(), partition=0)
            producer.commit_transaction(30)
    before = {txn_id: described(broker.bootstrap, txn_id) for txn_id in IDS}
    assert all(d.transaction_state == "CompleteCommit" for d in before.values())
    # 960 state records were appended (~63 per segment); cleaned, the sealed segments keep
    # one per id, and the active segment (never cleaned) at most a segment's worth.
    wait_until(lambda: _state_records(broker.bootstrap) < 2 * RECORDS_PER_SEGMENT, 30,
               interval=0.5, message="__transaction_state was not compacted")

    # A restarted broker replays the cleaned log: same producer id and epoch for every id,
    # and a new producer of an id is its next epoch (the old one is fenced), as in Kafka.
    broker.restart()
    for txn_id in IDS:
        after = described(broker.bootstrap, txn_id)
        assert after.error_code == ErrorCode.NONE
        assert (after.producer_id, after.producer_epoch, after.transaction_state) == \
            (before[txn_id].producer_id, before[txn_id].producer_epoch, "CompleteCommit")
    successor = txn_producer(broker.bootstrap, IDS[0])
    successor.init_transactions(30)
    successor.begin_transaction()
    successor.produce("paid", b"after", partition=0)
    successor.commit_transaction(30)
    bumped = described(broker.bootstrap, IDS[0])
    assert bumped.producer_id == before[IDS[0]].producer_id
    assert bumped.producer_epoch == before[IDS[0]].producer_epoch + 1
    values = read_values(broker.bootstrap, "paid", 1, "read_committed")
    assert values == [f"{t}/{i}" for t in IDS for i in range(TRANSACTIONS)] + ["after"]
