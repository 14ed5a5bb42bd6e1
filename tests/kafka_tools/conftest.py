"""Fixtures of the tests of Kafka's own tools: Kafka's jars resolved once a session, and one
`bmq serve` a test module for the tools to talk to."""

from __future__ import annotations

import pytest

from tests.conftest import BrokerFactory, BrokerProcess
from tests.kafka_tools.tools import KafkaTools, build

# Groups form at once (no initial rebalance delay): the console and perf consumers join quickly.
TOOLS_ENV = {"BMQ_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"}


@pytest.fixture(scope="session")
def kafka_jars() -> None:
    build()


@pytest.fixture(scope="module")
def tools_broker(kafka_jars: None, module_broker_factory: BrokerFactory) -> BrokerProcess:
    return module_broker_factory(env=TOOLS_ENV)


@pytest.fixture(scope="module")
def kafka(tools_broker: BrokerProcess) -> KafkaTools:
    return KafkaTools(tools_broker.bootstrap)
