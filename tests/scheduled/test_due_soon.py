"""Records due sooner than their hold becomes durable: two idempotent producers send 800
records a second due 0-300 ms ahead to a `bmq serve` (the scheduled workload of tests/faults).
A record is indexed only once its timer log write is durable; meanwhile the timer delivered
records due later, whose cursor then made the record look delivered already: 216 of 8,446 and
286 of 9,183 acknowledged records were never delivered (two runs of 15 s), before the timer
waited for holds in flight."""

from __future__ import annotations

import json
import threading
import time

import pytest

from tests.conftest import BrokerFactory
from tests.faults.history import History
from tests.faults.scheduled import ScheduledWorkload
from tests.faults.workload import Endpoints

pytestmark = pytest.mark.timeout(180)


def test_records_due_within_their_hold_are_delivered(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    endpoints = Endpoints(broker.bootstrap, None, broker.bootstrap)
    workload = ScheduledWorkload(min_delay_ms=0, spread_ms=300, rate=400.0, producers=2,
                                 bound_s=30.0)
    workload.setup(endpoints)
    history, stop = History(), threading.Event()
    clients = threading.Thread(target=workload.run, args=(endpoints, history, stop, 1))
    clients.start()
    time.sleep(8.0)
    stop.set()
    clients.join()
    verdict = workload.check(endpoints, history)
    assert verdict.valid, json.dumps({k: [len(v), v[:3]] for k, v in verdict.anomalies.items()})
    assert verdict.stats["sent"] > 2000, verdict.stats
