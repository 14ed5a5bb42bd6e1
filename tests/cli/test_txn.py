"""`bmq txn list|describe` and `bmq consume --isolation-level` against transactions written by
a real confluent-kafka transactional producer."""

from __future__ import annotations

import json

from tests.cli.conftest import Bmq
from tests.transactions.helpers import txn_producer


def test_txn_list_describe_and_consume_isolation(bmq: Bmq, topic: str) -> None:
    bmq("topic", "create", topic, "--partitions", "2")
    producer = txn_producer(bmq.bootstrap, "cli-" + topic)
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"kept", partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"dropped", partition=0)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=1)
    producer.flush(30)      # left open

    listed = json.loads(bmq("txn", "list", "-o", "json").out)
    mine = [t for t in listed if t["transactional_id"] == "cli-" + topic]
    assert [t["state"] for t in mine] == ["Ongoing"]
    def ids_in(state: str) -> list[str]:
        return [t["transactional_id"] for t in
                json.loads(bmq("txn", "list", "--state", state, "-o", "json").out)]

    assert "cli-" + topic in ids_in("Ongoing")
    assert "cli-" + topic not in ids_in("CompleteCommit")
    bad = bmq("txn", "list", "--state", "Sleeping", check=False)
    assert bad.code == 1 and "Sleeping" in bad.err
    described = json.loads(bmq("txn", "describe", "cli-" + topic, "-o", "json").out)
    assert described["state"] == "Ongoing"
    assert described["partitions"] == [f"{topic}-1"]
    assert described["producer_id"] == mine[0]["producer_id"]
    table = bmq("txn", "describe", "cli-" + topic).out
    assert "Ongoing" in table and f"{topic}-1" in table
    unknown = bmq("txn", "describe", "nobody-" + topic, check=False)
    assert unknown.code == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in unknown.err

    committed = bmq("consume", topic, "--from-beginning", "-e").out.split()
    assert committed == ["kept"]
    everything = bmq("consume", topic, "--from-beginning", "-e",
                     "--isolation-level", "read_uncommitted").out.split()
    assert sorted(everything) == ["dropped", "kept", "open"]
    producer.abort_transaction(30)
