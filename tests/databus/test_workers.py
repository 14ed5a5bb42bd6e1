"""An agent of several worker processes: they share its ports, each connection is served by
one of them with a spool of its own; what they took is delivered once, in order per key and
connection; the status adds them up; a kill -9 of the agent takes them all, and an idempotent
client's retry after the restart is recognised whichever worker it reaches."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from bmq.databus.spool import Spool
from tests.conftest import BrokerProcess, make_topic_name
from tests.databus.conftest import (
    DatabusFactory,
    DatabusProcess,
    create_topic,
    new_producer_id,
    raw_produce,
    read_all,
    wait_until,
)

PRODUCERS = 12      # 24 connections (librdkafka's bootstrap one and the broker's)


def test_workers_share_the_ports_and_deliver_everything_once_in_order(
        cluster: BrokerProcess, databus_factory: DatabusFactory) -> None:
    topic = make_topic_name("workers")
    create_topic(cluster, topic, 3)
    agent = databus_factory(cluster, workers=2)
    # The first worker serves last (after the others): until then every connection is
    # another's.
    wait_until(lambda: "databus worker 0 listening" in agent.log_text(), 10, "worker 0 serving")
    expected: dict[bytes, list[bytes]] = defaultdict(list)
    producers = [Producer({"bootstrap.servers": agent.bootstrap, "acks": "all",
                           "linger.ms": 2}) for _ in range(PRODUCERS)]
    errors: list[Any] = []
    for i in range(50):
        for number, producer in enumerate(producers):
            key = f"p{number}-k{i % 3}".encode()
            producer.produce(topic, key=key, value=f"{number}-{i}".encode(),
                             on_delivery=lambda error, _: errors.append(error) if error else None)
            expected[key].append(f"{number}-{i}".encode())
            producer.poll(0)
    for i in range(20):
        status, answer = agent.post(topic, f"http-{i}".encode(), headers={"X-Key": "http"})
        assert status == 200, answer
        expected[b"http"].append(f"http-{i}".encode())
    assert all(producer.flush(30) == 0 for producer in producers) and errors == []
    total = sum(len(values) for values in expected.values())
    seen = read_all(cluster, topic, 3, total, timeout=30)
    by_key: dict[bytes, list[bytes]] = defaultdict(list)
    for _, _, key, value, _ in sorted(seen, key=lambda s: (s[0], s[1])):
        by_key[key].append(value)
    assert by_key == expected           # each once, in order per key
    workers = wait_until(lambda: _statuses_adding_up_to(agent, total), 5,
                         "every worker's status written")
    assert all(w["accepted"].get("kafka") for w in workers), workers   # both served clients
    status_doc = json.loads(subprocess.run(
        ["curl", "-s", agent.url("/status")], capture_output=True, check=True,
        timeout=10).stdout)
    assert status_doc["workers"] == 2
    assert status_doc["accepted"] == {"kafka": total - 20, "http": 20}


def _statuses_adding_up_to(agent: DatabusProcess, total: int) -> list[dict[str, Any]] | None:
    """The workers' status files once the messages they accepted are ``total``."""
    workers = [json.loads((agent.spool_dir / f"worker-{w}" / "status.json").read_text())
               for w in range(2)]
    return workers if sum(sum(w["accepted"].values()) for w in workers) == total else None


@pytest.mark.slow          # two agent starts, a kill -9: about 8 s
def test_a_retry_after_kill_9_is_recognised_by_whichever_worker_it_reaches(
        cluster: BrokerProcess, databus_factory: DatabusFactory) -> None:
    """Six idempotent clients each had a batch answered before the agent (both workers) was
    killed; after the restart each sends it again on a new connection, which either worker
    may take (all six on the worker that had it: 1 in 64): every retry is answered, acks=1
    and acks=all, and each record is in the cluster once."""
    topic = make_topic_name("retried-workers")
    create_topic(cluster, topic, 1)
    agent = databus_factory(cluster, workers=2)
    producers = [asyncio.run(new_producer_id(agent.port)) for _ in range(6)]
    for number, producer in enumerate(producers):
        assert asyncio.run(raw_produce(agent.port, topic, producer, 0, b"%d" % number)) == 0
    agent.kill()
    agent.start()
    for number, producer in enumerate(producers):
        acks = 1 if number % 2 else -1
        assert asyncio.run(raw_produce(agent.port, topic, producer, 0, b"%d" % number,
                                       acks)) == 0
        assert asyncio.run(raw_produce(agent.port, topic, producer, 1, b"next", acks)) == 0
    seen = read_all(cluster, topic, 1, 12, timeout=30)
    assert sorted(value for *_, value, _ in seen) == sorted(
        [b"%d" % n for n in range(6)] + [b"next"] * 6)


@pytest.mark.slow
def test_a_spool_left_by_more_workers_is_not_left_behind(
        cluster: BrokerProcess, databus_factory: DatabusFactory) -> None:
    """A batch in worker 1's spool, and the agent started with one worker: it refuses to
    start, saying how many it needs, rather than leave the batch unsent."""
    agent = databus_factory(cluster, workers=2)
    agent.stop()
    spool = Spool(agent.spool_dir / "worker-1", 1 << 20)
    spool.recover()
    spool.append("orphan", 0, bytearray(100), 1)
    spool.close()
    run = subprocess.run([*agent.command(), "--workers", "1"], capture_output=True,
                         timeout=30, text=True)
    assert run.returncode == 2, run.stderr
    assert "worker-1 holds 1 batches" in run.stderr and "workers = 2" in run.stderr


@pytest.mark.slow          # a worker's restart: about 5 s
def test_a_worker_killed_is_started_again_and_serves(
        cluster: BrokerProcess, databus_factory: DatabusFactory) -> None:
    topic = make_topic_name("restarted")
    create_topic(cluster, topic, 1)
    agent = databus_factory(cluster, workers=2)
    assert agent.proc is not None
    children = Path(f"/proc/{agent.proc.pid}/task/{agent.proc.pid}/children").read_text()
    os.kill(int(children.split()[0]), signal.SIGKILL)
    wait_until(lambda: agent.log_text().count("databus worker 1 listening") == 2, 30,
               "worker 1 serving again")
    assert "databus worker 1 exited with -9: started again" in agent.log_text()
    # Connections reach both workers (requests of their own each): all are answered.
    answers = [agent.post(topic, b"%d" % i) for i in range(20)]
    assert [status for status, _ in answers] == [200] * 20
    assert sorted(s[3] for s in read_all(cluster, topic, 1, 20)) == sorted(
        b"%d" % i for i in range(20))
