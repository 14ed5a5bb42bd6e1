"""Fixtures for the transaction tests: `bmq serve` with few internal partitions (fast start)
and a short timeout check, so a vanished producer's transaction aborts within a second."""

from __future__ import annotations

from typing import Any

import pytest

TXN_CONFIG: dict[str, Any] = {
    "transaction_state_log_num_partitions": 4,
    "offsets_topic_num_partitions": 4,
    "transaction_abort_timed_out_transaction_cleanup_interval_ms": 200,
    "group_initial_rebalance_delay_ms": 200,
    "group_min_session_timeout_ms": 500,
}


@pytest.fixture(scope="module")
def txn_broker(module_broker_factory: Any) -> Any:
    return module_broker_factory(config=TXN_CONFIG)
