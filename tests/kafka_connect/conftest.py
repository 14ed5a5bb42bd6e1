"""Fixtures of the Kafka Connect tests: Kafka's jars (the worker and the file connectors)
resolved once a session, a `bmq serve` for a test, and its workers (``connect_workers``), every
one killed when the test ends; a failed test's report has the workers' logs."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

import pytest

from tests.conftest import BrokerFactory, BrokerProcess
from tests.kafka_connect.worker import ConnectWorkers
from tests.kafka_tools.tools import build

# Groups form at once (no initial rebalance delay), as Kafka's test brokers are set up: a
# worker's first join is not held 3 s.
CONNECT_BROKER_ENV = {"BMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"}


@pytest.fixture(scope="session")
def kafka_jars() -> None:
    build()


@pytest.fixture
def connect_broker(kafka_jars: None, broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory(env=CONNECT_BROKER_ENV)


@pytest.fixture
def connect_workers(kafka_jars: None,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectWorkers]:
    workers = ConnectWorkers(tmp_path_factory.mktemp("connect"))
    try:
        yield workers
    finally:
        workers.cleanup()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        workers = getattr(item, "funcargs", {}).get("connect_workers")
        for worker in workers.workers if isinstance(workers, ConnectWorkers) else []:
            report.sections.append((f"Connect worker {worker.worker_id}", worker.log_tail()))
