"""`bmq admin partitions`: every partition's owner, leader epoch and state, read from ZooKeeper."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from bmq.cluster.zk import ASSIGNED, DRAINING, UNASSIGNED, Paths, loads


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
    states = []
    for topic in sorted(zk.get_children(paths.topics)):
        info = _get(zk, paths.topic(topic))
        if info is None:
            continue
        doc = _get(zk, paths.assignment(topic)) or {}
        for p in range(int(info["partitions"])):
            a = doc.get(str(p))
            if a is None or int(a.get("owner", -1)) < 0:
                states.append(PartitionState(topic, p, -1, int(a["epoch"]) if a else 0,
                                             UNASSIGNED))
                continue
            owner, epoch = int(a["owner"]), int(a["epoch"])
            report = brokers.get(owner, {}).get("partitions", {}).get(f"{topic}/{p}")
            if owner not in brokers:
                state = "owner-down"
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
