"""transactional.id.expiration.ms: an id idle for longer is forgotten (a tombstone in
__transaction_state, so it stays forgotten after a restart), and its next producer starts with
a new producer id, as in Kafka."""

from __future__ import annotations

import time
from typing import Any

from bmq.protocol.errors import ErrorCode
from tests.integration.helpers import create_topic
from tests.transactions.conftest import TXN_CONFIG
from tests.transactions.helpers import described, txn_producer

EXPIRING = {**TXN_CONFIG, "transactional_id_expiration_ms": 1000,
            "transaction_remove_expired_transaction_cleanup_interval_ms": 200}


def test_an_idle_transactional_id_expires_and_stays_expired(broker_factory: Any) -> None:
    broker = broker_factory(config=EXPIRING)
    create_topic(broker.bootstrap, "expiring", partitions=1)
    producer = txn_producer(broker.bootstrap, "idle-id")
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("expiring", b"x", partition=0)
    producer.commit_transaction(30)
    before = described(broker.bootstrap, "idle-id")
    assert before.error_code == ErrorCode.NONE and before.transaction_state == "CompleteCommit"
    deadline = time.monotonic() + 15
    while described(broker.bootstrap, "idle-id").error_code == ErrorCode.NONE:
        assert time.monotonic() < deadline, "the idle id never expired"
        time.sleep(0.2)
    assert described(broker.bootstrap, "idle-id").error_code == \
        ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    broker.restart()
    assert described(broker.bootstrap, "idle-id").error_code == \
        ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    fresh = txn_producer(broker.bootstrap, "idle-id")
    fresh.init_transactions(30)
    after = described(broker.bootstrap, "idle-id")
    assert after.error_code == ErrorCode.NONE
    assert after.producer_id != before.producer_id and after.producer_epoch == 0
