"""The ZooKeeper layout of a BMQ cluster and helpers for its JSON documents.

Everything lives under one root (``zookeeper_root``, ``/bmq`` by default)::

    /cluster_id                 the cluster id (text)
    /controller                 ephemeral: the active controller ({"host", "pid"})
    /controller_epoch           bumped by each new active controller; its writes check it
    /brokers/ids/<id>           ephemeral registration of a live broker: {"host", "port",
                                "draining", "reports": its partitions' states by topic}
                                (bmq/metadata/zookeeper/reports.py)
    /topics/<name>              {"topic_id", "partitions", "configs"}   (written by admin APIs)
    /assignments/<name>         {"<p>": {"owner", "reg", "epoch", "draining"}}  (controller only)
    /producer_ids               {"next_block_start"}: producer-id blocks, taken by CAS
    /proxies/<id>               ephemeral registration of a live proxy: {"host", "port"}
    /drain_requests/<id>        persistent: an operator asked for broker <id> to own nothing
                                (`bmq cluster drain`); the controller treats it as draining
    /security/<document>        SCRAM credentials, ACLs, client quotas, dynamic broker and
                                group configs, databus stream mappings: JSON documents changed
                                by compare-and-set (bmq/metadata/zookeeper/documents.py)

A registration's ``reg`` is the creation zxid of the broker's ephemeral node: an assignment names
one incarnation of a broker, so a restarted broker never inherits its previous life's epoch.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from bmq.config import split_host_port

log = logging.getLogger(__name__)

# Partition states, in the order the state machine visits them.
ASSIGNED = "assigned"
RECOVERING = "recovering"
WRITABLE = "writable"
DRAINING = "draining"
RELEASED = "released"
FENCED = "fenced"         # storage holds a higher epoch than the assignment (reported with it)
UNASSIGNED = "unassigned"
OWNER_DOWN = "owner-down"  # the owner's registration is gone and no new owner is assigned yet
STATES = (ASSIGNED, RECOVERING, WRITABLE, DRAINING, RELEASED, FENCED, UNASSIGNED, OWNER_DOWN)


class Paths:
    def __init__(self, root: str) -> None:
        self.root = "/" + root.strip("/") if root.strip("/") else ""
        self.cluster_id = f"{self.root}/cluster_id"
        self.controller = f"{self.root}/controller"
        self.controller_epoch = f"{self.root}/controller_epoch"
        self.brokers = f"{self.root}/brokers/ids"
        self.topics = f"{self.root}/topics"
        self.assignments = f"{self.root}/assignments"
        self.producer_ids = f"{self.root}/producer_ids"
        self.proxies = f"{self.root}/proxies"
        self.drain_requests = f"{self.root}/drain_requests"
        self.security = f"{self.root}/security"

    def broker(self, broker_id: int) -> str:
        return f"{self.brokers}/{broker_id}"

    def topic(self, name: str) -> str:
        return f"{self.topics}/{name}"

    def assignment(self, name: str) -> str:
        return f"{self.assignments}/{name}"

    def proxy(self, node_id: int | str) -> str:
        return f"{self.proxies}/{node_id}"

    def drain_request(self, broker_id: int) -> str:
        return f"{self.drain_requests}/{broker_id}"

    def security_document(self, name: str) -> str:
        return f"{self.security}/{name}"


# How often the controller, brokers and proxies read all of ZooKeeper without a change: only
# insurance (watches and connection changes wake a read at once; kazoo does not re-arm watches
# after a reconnect, but the reconnect itself wakes one). Each read goes through kazoo in
# Python: at 1 s (controller) and 2 s (brokers, proxies) it cost an idle controller 15-20% of
# a core and an idle proxy 9-24%.
RESYNC_INTERVAL_S = 10.0

def connect(hosts: str, session_timeout_ms: int, *, start_timeout_s: float = 15.0) -> KazooClient:
    """A started kazoo client. ``hosts`` is ``HOST:PORT[,HOST:PORT...]``."""
    for host in hosts.split(","):
        split_host_port(host.split("/", 1)[0])
    client = KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000)
    # Until the first session, kazoo's retry warnings say only what the caller reports anyway
    # (a role: one line and an exit code if the wait times out).
    kazoo_log = logging.getLogger("kazoo.client")
    level = kazoo_log.level
    kazoo_log.setLevel(max(level, logging.ERROR))
    try:
        client.start(timeout=start_timeout_s)
    except KazooTimeoutError as error:   # kazoo's says only "Connection time-out"
        raise KazooTimeoutError(
            f"cannot reach ZooKeeper {hosts} within {start_timeout_s:g} s") from error
    finally:
        kazoo_log.setLevel(level)
    return client


@contextlib.contextmanager
def session(hosts: str, timeout_ms: int = 10_000) -> Iterator[KazooClient]:
    """A short-lived client for an operator command; closed on the way out."""
    # The command reports failures itself: kazoo's retry warnings would only clutter its output
    # (with no handler configured, Python prints them to stderr).
    logging.getLogger("kazoo").addHandler(logging.NullHandler())
    zk = connect(hosts, timeout_ms, start_timeout_s=timeout_ms / 1000)
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()


def track_connection(zk: KazooClient) -> None:
    """Keep the ``bmq_zookeeper_connected`` gauge current from kazoo's connection states."""
    from bmq import metrics

    def on_state(state: str) -> None:
        metrics.set_zookeeper_connected(state == KazooState.CONNECTED)

    zk.add_listener(on_state)
    # The listener only hears about changes: the state when it was added comes from here.
    metrics.set_zookeeper_connected(zk.connected)


def read_children(zk: KazooClient, path: str, watch: Callable[..., object] | None = None
                  ) -> dict[str, bytes]:
    """The data of every child of ``path``, fetched in parallel, with ``watch`` (if any) set on
    the list and on each child (children deleted meanwhile are left out)."""
    pending = [(name, zk.get_async(f"{path}/{name}", watch=watch))
               for name in zk.get_children(path, watch=watch)]
    found = {}
    for name, result in pending:
        with contextlib.suppress(NoNodeError):
            found[name] = result.get()[0]
    return found


def ensure_layout(zk: KazooClient, paths: Paths) -> None:
    for path in (paths.brokers, paths.topics, paths.assignments, paths.proxies,
                 paths.drain_requests):
        zk.ensure_path(path)


def dumps(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def loads(data: bytes | None) -> Any:
    return json.loads(data) if data else None


def join_cluster(hosts: str, session_timeout_ms: int, paths: Paths) -> tuple[KazooClient, str]:
    """A started client of a cluster's node (broker or proxy): the connection gauge tracked, the
    layout made, and the cluster id (made by whoever comes first)."""
    zk = connect(hosts, session_timeout_ms)
    track_connection(zk)
    # Retried on a lost connection: the first session can be lost at once (an ensemble
    # still electing its leader, a loaded machine), and a node must not exit for it.
    retry = start_retry()
    retry(ensure_layout, zk, paths)
    return zk, retry(ensure_cluster_id, zk, paths)


def start_retry() -> KazooRetry:
    """Retries of a node's first ZooKeeper calls over a lost connection, for up to 30 s."""
    return KazooRetry(max_tries=-1, delay=0.2, max_delay=2.0, deadline=30.0)


def ensure_cluster_id(zk: KazooClient, paths: Paths) -> str:
    """The cluster id, made by whoever comes first (Kafka's 22-character base64 form)."""
    new = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    with contextlib.suppress(NodeExistsError):
        zk.create(paths.cluster_id, new.encode(), makepath=True)
    data, _ = zk.get(paths.cluster_id)
    return str(data.decode())
