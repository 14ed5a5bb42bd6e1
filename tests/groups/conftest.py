"""Fixtures for the consumer-group tests: brokers with short group timings."""

from __future__ import annotations

from typing import Any

import pytest

# A short initial rebalance delay and a low session-timeout floor keep the tests fast.
GROUP_ENV = {
    "BMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": "200",
    "BMQ_GROUP_MIN_SESSION_TIMEOUT_MS": "500",
}


@pytest.fixture(scope="module")
def group_broker(module_broker_factory: Any) -> Any:
    """One broker per test module, with GROUP_ENV."""
    return module_broker_factory(env=GROUP_ENV)
