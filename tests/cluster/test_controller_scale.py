"""The controller and the brokers' registrations at a hundred thousand partitions, on a real
ZooKeeper with its default limit on a request and a node (``jute.maxbuffer``, 1 MiB): the
controller places 1,000 topics of 100 partitions, each broker reports its ~33,000 partitions
writable in its registration, and when a broker's registration goes every one of its partitions
is given to the other two. Before, the controller wrote every changed assignment in one
transaction (~6 MB, refused) and a registration carried 30 bytes a partition (~1 MB, refused).

The brokers here are registrations the test writes, not processes: what is measured is what
ZooKeeper accepts from the controller and the brokers' report format, at full size."""

from __future__ import annotations

import json
import uuid

from kazoo.client import KazooClient

from bmq.controller.controller import Controller
from bmq.metadata.zookeeper.layout import WRITABLE, Paths, dumps, loads, read_children
from bmq.metadata.zookeeper.reports import decode, encode
from bmq.metadata.zookeeper.state import states_of

TOPICS = 1_000
PER_TOPIC = 100
BROKERS = (1, 2, 3)
ZK_NODE_LIMIT = 1 << 20


def register(zk: KazooClient, paths: Paths, broker: int, reports: dict[str, list[object]]) -> int:
    """Create or update ``broker``'s registration; returns its registration id (czxid)."""
    doc = dumps({"host": "127.0.0.1", "port": 9000 + broker, "draining": False,
                 "reports": encode(reports)})
    assert len(doc) < ZK_NODE_LIMIT // 4, f"registration of {len(reports)} reports: {len(doc)} B"
    path = paths.broker(broker)
    if zk.exists(path) is None:
        zk.create(path, doc, ephemeral=True)
    else:
        zk.set(path, doc)
    return int(zk.exists(path).czxid)


def assignments(zk: KazooClient, paths: Paths) -> dict[str, dict[str, dict]]:
    return {name: loads(data) for name, data in read_children(zk, paths.assignments).items()}


def test_a_hundred_thousand_partitions_are_placed_reported_and_moved(
        zk: tuple[KazooClient, Paths]) -> None:
    client, paths = zk
    names = [f"t{n:04d}" for n in range(TOPICS)]
    for result in [client.create_async(paths.topic(name), json.dumps(
            {"topic_id": str(uuid.uuid4()), "partitions": PER_TOPIC, "configs": {}}).encode())
            for name in names]:
        result.get()
    regs = {b: register(client, paths, b, {}) for b in BROKERS}
    controller = Controller("", paths.root, 10_000)
    assert controller._campaign(client)

    controller.reconcile(client)
    placed = assignments(client, paths)
    owned: dict[int, list[str]] = {b: [] for b in BROKERS}
    for name, doc in placed.items():
        assert sorted(doc, key=int) == [str(p) for p in range(PER_TOPIC)]
        for p, a in doc.items():
            assert (a["reg"], a["epoch"], a["draining"]) == (regs[a["owner"]], 1, False)
            owned[a["owner"]].append(f"{name}/{p}")
    shares = [len(keys) for keys in owned.values()]
    assert sum(shares) == TOPICS * PER_TOPIC and max(shares) - min(shares) < 100, shares

    # Each broker reports its share writable: a registration of ~33,000 partitions.
    for b in BROKERS:
        reports = {key: [1, WRITABLE] for key in owned[b]}
        register(client, paths, b, reports)
        assert decode(loads(client.get(paths.broker(b))[0])) == reports
    brokers = {b: loads(client.get(paths.broker(b))[0]) for b in BROKERS}
    topics = dict.fromkeys(names, PER_TOPIC)
    assert {s.state for s in states_of(topics, placed, brokers)} == {WRITABLE}

    # Broker 1 is gone: its 33,000 partitions go to 2 and 3 above their epoch, in one pass.
    client.delete(paths.broker(1))
    controller.reconcile(client)
    moved = assignments(client, paths)
    gone = set(owned[1])
    for name, doc in moved.items():
        for p, a in doc.items():
            if f"{name}/{p}" in gone:
                assert a["owner"] in (2, 3) and a["epoch"] == 2 and a["reg"] == regs[a["owner"]]
            else:
                assert a == placed[name][p]


def test_reports_group_partitions_and_keep_each_one() -> None:
    reports: dict[str, list[object]] = {f"orders/{p}": [3, WRITABLE] for p in range(100)}
    reports["orders/42"] = [4, "recovering"]
    reports["orders/7"] = [2, "fenced", 5]
    reports["a.b-c_d/0"] = [1, "released"]
    encoded = encode(reports)
    assert encoded == {"a.b-c_d": [[1, "released", "0"]],
                       "orders": [[2, "fenced", 5, "7"], [3, WRITABLE, "0-6,8-41,43-99"],
                                  [4, "recovering", "42"]]}
    assert decode({"reports": encoded}) == reports
    assert decode({}) == {}
