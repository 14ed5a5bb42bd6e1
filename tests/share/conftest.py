"""Fixtures of the share group tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import free_port
from tests.share.helpers import SHARE_ENV, ShareWorker


@pytest.fixture(scope="module")
def share_broker(module_broker_factory: Any) -> Any:
    """One `bmq serve` per test module, with its /metrics on ``.metrics_port``."""
    port = free_port()
    broker = module_broker_factory(env=SHARE_ENV, extra_args=["--metrics-port", str(port)])
    broker.metrics_port = port
    return broker


@pytest.fixture
def workers() -> Iterator[list[ShareWorker]]:
    """Share consumers in processes; killed when the test ends."""
    started: list[ShareWorker] = []
    yield started
    for worker in started:
        worker.kill()
