"""Scheduled records held, counted by due time (the read-only topic config
``bmq.delay.pending.due``, which the console's Scheduled page shows): the counts of records
still in memory and, once the timer has written them to a run on storage, of the run's entries
(read one block per bound), over several of the run's 4,096-entry blocks."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Producer

from bmq.client.requests import ask_once
from bmq.protocol.messages import DescribeConfigsRequest
from bmq.protocol.messages.describe_configs_request import DescribeConfigsResource
from tests.conftest import BrokerProcess
from tests.integration.helpers import create_topic, topic_configs
from tests.scheduled.helpers import DELAY

pytestmark = pytest.mark.timeout(120)
# Delays (ms) and how many records each, one to each due-time bucket but the third
# (10 min-1 h): within 1 min, 1-10 min, 1 h-1 day, later.
SCHEDULE = {30_000: 1, 120_000: 3000, 7_200_000: 3000, 172_800_000: 3000}
EXPECTED = "0:1/3000/0/3000/3000,1:0/0/0/0/0"
RUN_INTERVAL_S = 10     # the timer writes what it indexed as a run this often (wheel.py)
PENDING_DUE = "bmq.delay.pending.due"
TOPIC_RESOURCE = 2


def pending_by_due(broker: BrokerProcess, topic: str) -> str:
    """The config, asked for by name (DescribeConfigs v4) as it is only given when asked."""
    request = DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=topic, configuration_keys=[PENDING_DUE])])
    answer = asyncio.run(ask_once((broker.host, broker.port), request, 4, 10, "test"))
    [result] = answer.results
    [entry] = result.configs
    return str(entry.value)


@pytest.mark.slow
def test_pending_records_counted_by_due_time(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 2, {"bmq.delay.enable": "true"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    for delay, count in SCHEDULE.items():
        for n in range(count):
            producer.produce(topic, value=b"%d" % n, partition=0,
                             headers=[(DELAY, str(delay).encode())])
    assert producer.flush(30) == 0
    configs = topic_configs(broker.bootstrap, topic)
    assert configs["bmq.delay.pending"] == "0:9001,1:0"
    assert PENDING_DUE not in configs     # storage reads: only when asked for by name
    assert pending_by_due(broker, topic) == EXPECTED          # in memory
    time.sleep(RUN_INTERVAL_S + 2)
    assert pending_by_due(broker, topic) == EXPECTED          # in a run
