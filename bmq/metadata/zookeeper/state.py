"""What operators read and ask through ZooKeeper (`bmq admin partitions`, `bmq cluster info`,
`bmq cluster drain`): partition states, brokers, proxies, the controller and drain requests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from bmq.metadata.views import is_view
from bmq.metadata.zookeeper import reports
from bmq.metadata.zookeeper.layout import ASSIGNED, DRAINING, OWNER_DOWN, UNASSIGNED, Paths, loads


@dataclass(frozen=True, slots=True)
class PartitionState:
    topic: str
    partition: int
    owner: int
    epoch: int
    state: str


def _get(zk: KazooClient, path: str) -> Any:
    try:
        data, _ = zk.get(path)
    except NoNodeError:
        return None
    return loads(data)


def partition_states(zk: KazooClient, paths: Paths) -> list[PartitionState]:
    brokers = {int(b): _get(zk, paths.broker(int(b))) or {}
               for b in zk.get_children(paths.brokers)}
    topics: dict[str, int] = {}
    assignments: dict[str, dict[str, Any]] = {}
    for topic in zk.get_children(paths.topics):
        info = _get(zk, paths.topic(topic))
        if info is not None and not is_view(info.get("configs", {})):   # views have none
            topics[topic] = int(info["partitions"])
            assignments[topic] = _get(zk, paths.assignment(topic)) or {}
    return states_of(topics, assignments, brokers)


def states_of(topics: dict[str, int], assignments: dict[str, dict[str, Any]],
              brokers: dict[int, dict[str, Any]]) -> list[PartitionState]:
    """Every partition's state from what ZooKeeper holds: ``topics`` (partition counts),
    ``assignments`` (documents by topic) and ``brokers`` (registration documents by id)."""
    states = []
    reported = {b: reports.decode(doc) for b, doc in brokers.items()}
    for topic in sorted(topics):
        doc = assignments.get(topic) or {}
        for p in range(topics[topic]):
            a = doc.get(str(p))
            if a is None or int(a.get("owner", -1)) < 0:
                states.append(PartitionState(topic, p, -1, int(a["epoch"]) if a else 0,
                                             UNASSIGNED))
                continue
            owner, epoch = int(a["owner"]), int(a["epoch"])
            report = reported.get(owner, {}).get(f"{topic}/{p}")
            if owner not in brokers:
                state = OWNER_DOWN
            elif report and report[0] == epoch:
                state = str(report[1])
            else:
                state = DRAINING if a.get("draining") else ASSIGNED
            states.append(PartitionState(topic, p, owner, epoch, state))
    return states


def broker_list(zk: KazooClient, paths: Paths) -> list[tuple[int, str, int, bool]]:
    found = []
    for b in sorted(zk.get_children(paths.brokers), key=int):
        doc = _get(zk, paths.broker(int(b)))
        if doc is not None:
            found.append((int(b), str(doc["host"]), int(doc["port"]), bool(doc.get("draining"))))
    return found


def proxy_list(zk: KazooClient, paths: Paths) -> list[tuple[str, str, int]]:
    """(node id, host, port) of every registered proxy."""
    try:
        children = zk.get_children(paths.proxies)
    except NoNodeError:     # a cluster laid out before proxies existed
        return []
    found = []
    for name in sorted(children, key=lambda n: (len(n), n)):
        doc = _get(zk, paths.proxy(name))
        if doc is not None:
            found.append((name, str(doc["host"]), int(doc["port"])))
    return found


def active_controller(zk: KazooClient, paths: Paths) -> dict[str, Any] | None:
    """The active controller's registration ({"host", "pid"}), None while there is none."""
    doc = _get(zk, paths.controller)
    return doc if isinstance(doc, dict) else None


def drain_requests(zk: KazooClient, paths: Paths) -> set[int]:
    try:
        return {int(c) for c in zk.get_children(paths.drain_requests) if c.isdigit()}
    except NoNodeError:
        return set()


def request_drain(zk: KazooClient, paths: Paths, broker_id: int) -> bool:
    """Ask the controller to move every partition off ``broker_id``; False if already asked."""
    try:
        zk.create(paths.drain_request(broker_id), b"", makepath=True)
    except NodeExistsError:
        return False
    return True


def cancel_drain(zk: KazooClient, paths: Paths, broker_id: int) -> bool:
    """Withdraw a drain request; False if there was none."""
    try:
        zk.delete(paths.drain_request(broker_id))
    except NoNodeError:
        return False
    return True
