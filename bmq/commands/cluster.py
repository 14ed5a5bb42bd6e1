"""`bmq cluster info` (brokers, controller, counts; with ZooKeeper also partition states and
proxies) and `bmq cluster drain` (move every partition off a broker for a clean scale-in)."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import click

from bmq.commands.common import (
    EXIT_UNREACHABLE,
    Connection,
    F,
    connection_options,
    counted,
    fail,
    output_option,
    print_json,
    print_table,
    say,
)
from bmq.metadata.nodes import is_proxy

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from bmq.metadata.zookeeper.layout import Paths

POLL_S = 0.2


@click.group()
def cluster() -> None:
    """Look at the cluster as a whole, and take brokers out of it.

    \b
    Examples:
      bmq cluster info -b broker1:9092 --zookeeper zk:2181
      bmq cluster drain 3 --zookeeper zk:2181
    """


def zookeeper_options(required: bool) -> Callable[[F], F]:
    """--zookeeper and --root: cluster state only the controller's ZooKeeper holds."""
    def decorate(command: F) -> F:
        command = click.option(
            "--root", default="/bmq", show_default=True, envvar="BMQ_ZOOKEEPER_ROOT",
            help="The cluster's ZooKeeper root (or $BMQ_ZOOKEEPER_ROOT).")(command)
        return click.option(
            "--zookeeper", required=required, envvar="BMQ_ZOOKEEPER",
            metavar="HOST:PORT[,...]",
            help="The cluster's ZooKeeper (or $BMQ_ZOOKEEPER)"
                 + ("." if required else ": adds partition states and proxies."))(command)
    return decorate


@contextlib.contextmanager
def open_zookeeper(hosts: str, root: str, timeout_s: float = 10.0
              ) -> Iterator[tuple[KazooClient, Paths]]:
    from bmq.metadata.zookeeper.layout import Paths, session

    try:
        with session(hosts, int(timeout_s * 1000)) as zk:
            yield zk, Paths(root)
    except ValueError as error:     # a malformed connect string
        raise click.BadParameter(str(error), param_hint="--zookeeper") from error
    except Exception as error:
        from kazoo.handlers.threading import KazooTimeoutError

        if isinstance(error, KazooTimeoutError):
            fail(f"cannot reach ZooKeeper at {hosts} within {timeout_s:g} s", EXIT_UNREACHABLE)
        raise


def cluster_info(conn: Connection) -> dict[str, Any]:
    meta = conn.metadata()
    described = conn.wait(conn.admin().describe_cluster(request_timeout=conn.timeout),
                          "cannot describe the cluster")
    controller = described.controller
    topics = meta.topics
    internal = [name for name in topics if name.startswith("__")]
    nodes = [{"id": node.id, "host": node.host, "port": node.port, "rack": node.rack,
              "controller": controller is not None and node.id == controller.id}
             for node in sorted(described.nodes, key=lambda n: n.id)]
    return {
        "cluster_id": described.cluster_id,
        "controller": None if controller is None else controller.id,
        # A BMQ cluster's proxies are nodes too (clients fetch from them): listed apart.
        "brokers": [node for node in nodes if not is_proxy(node["id"])],
        "proxies": [node for node in nodes if is_proxy(node["id"])],
        "topics": len(topics) - len(internal),
        "partitions": sum(len(t.partitions) for n, t in topics.items() if n not in internal),
        "internal_topics": len(internal),
        "internal_partitions": sum(len(topics[n].partitions) for n in internal),
    }


def zookeeper_info(zk: KazooClient, paths: Paths) -> dict[str, Any]:
    """What the controller knows: its own registration, brokers as registered (draining, drain
    requests, partitions owned), proxies, and every partition's owner, epoch and state."""
    from bmq.metadata.zookeeper.state import (
        active_controller,
        broker_list,
        drain_requests,
        partition_states,
        proxy_list,
    )

    states = partition_states(zk, paths)
    owned = Counter(s.owner for s in states)
    requested = drain_requests(zk, paths)
    cluster_id = zk.exists(paths.cluster_id) and zk.get(paths.cluster_id)[0].decode()
    return {
        "cluster_id": cluster_id or None,
        "active_controller": active_controller(zk, paths),
        "brokers": [{"id": b, "host": host, "port": port, "draining": draining,
                     "drain_requested": b in requested, "partitions": owned[b]}
                    for b, host, port, draining in broker_list(zk, paths)],
        "drain_requests": sorted(requested),
        "proxies": [{"id": node, "host": host, "port": port}
                    for node, host, port in proxy_list(zk, paths)],
        "partition_states": dict(Counter(s.state for s in states)),
        "partition_list": [{"topic": s.topic, "partition": s.partition, "owner": s.owner,
                            "epoch": s.epoch, "state": s.state} for s in states],
    }


@cluster.command()
@output_option
@zookeeper_options(required=False)
@connection_options
def info(conn: Connection, output: str, zookeeper: str | None, root: str) -> None:
    """Show the cluster id, the brokers, the controller and topic/partition counts.

    With --zookeeper also the active controller process, each broker's partitions and drain
    state, the proxies, a count of partitions per state and every partition that is not
    writable (`-o json` lists them all).

    \b
    Examples:
      bmq cluster info -o json
      bmq cluster info --zookeeper zk:2181
    """
    zk_doc: dict[str, Any] = {}
    if zookeeper:
        with open_zookeeper(zookeeper, root, conn.timeout) as (zk, paths):
            zk_doc = zookeeper_info(zk, paths)
        source = click.get_current_context().get_parameter_source("bootstrap")
        if source == click.core.ParameterSource.DEFAULT and zk_doc["brokers"]:
            # No --bootstrap: the brokers ZooKeeper knows, not whatever answers on localhost.
            conn.bootstrap = ",".join(f"{b['host']}:{b['port']}" for b in zk_doc["brokers"])
    doc = cluster_info(conn)
    if zookeeper:
        if zk_doc["cluster_id"] and doc["cluster_id"] != zk_doc["cluster_id"]:
            fail(f"the brokers at {conn.bootstrap} are cluster {doc['cluster_id']}, ZooKeeper "
                 f"{zookeeper} (root {root}) has cluster {zk_doc['cluster_id']}: give --bootstrap "
                 f"brokers of that cluster")
        doc["zookeeper"] = zk_doc
    if output == "json":
        print_json(doc)
        return
    controller = doc["controller"] if doc["controller"] is not None else "-"
    proxies = f", {counted(len(doc['proxies']), 'proxy', 'proxies')}" if doc["proxies"] else ""
    click.echo(f"Cluster {doc['cluster_id']}: {counted(len(doc['brokers']), 'broker')}{proxies}, "
               f"controller {controller}, {counted(doc['topics'], 'topic')} with "
               f"{counted(doc['partitions'], 'partition')} (+{doc['internal_topics']} internal "
               f"with {counted(doc['internal_partitions'], 'partition')})")
    if not zookeeper:
        print_table(None, ("ID", "HOST", "PORT", "RACK", "CONTROLLER"),
                    [(b["id"], b["host"], b["port"], b["rack"], "yes" if b["controller"] else "")
                     for b in doc["brokers"]], right=("ID", "PORT"))
        if doc["proxies"]:
            print_table("Proxies", ("ID", "HOST", "PORT"),
                        [(p["id"], p["host"], p["port"]) for p in doc["proxies"]],
                        right=("ID", "PORT"))
        return
    zk_doc = doc["zookeeper"]
    registered = {b["id"]: b for b in zk_doc["brokers"]}
    rows = []
    for b in doc["brokers"]:
        reg = registered.get(b["id"], {})
        drain = "requested" if b["id"] in zk_doc["drain_requests"] else \
            "yes" if reg.get("draining") else ""
        rows.append((b["id"], b["host"], b["port"], b["rack"], "yes" if b["controller"] else "",
                     reg.get("partitions", 0), drain))
    print_table(None, ("ID", "HOST", "PORT", "RACK", "CONTROLLER", "PARTITIONS", "DRAINING"),
                rows, right=("ID", "PORT", "PARTITIONS"))
    active = zk_doc["active_controller"]
    click.echo("Active controller: " + (f"{active.get('host')} (pid {active.get('pid')})"
                                        if active else "none"))
    if zk_doc["proxies"]:
        print_table("Proxies", ("ID", "HOST", "PORT"),
                    [(p["id"], p["host"], p["port"]) for p in zk_doc["proxies"]],
                    right=("ID", "PORT"))
    else:
        click.echo("Proxies: none")
    counts = zk_doc["partition_states"]
    click.echo("Partition states: " + (", ".join(f"{n} {state}" for state, n in
                                                 sorted(counts.items())) or "no partitions"))
    waiting = [p for p in zk_doc["partition_list"] if p["state"] != "writable"]
    if waiting:
        print_table("Partitions not writable", ("TOPIC", "PARTITION", "OWNER", "EPOCH", "STATE"),
                    [(p["topic"], p["partition"], p["owner"], p["epoch"], p["state"])
                     for p in waiting], right=("PARTITION", "OWNER", "EPOCH"))


@cluster.command()
@click.argument("broker", type=int)
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="Wait until the broker owns nothing and its partitions are writable "
                   "elsewhere.")
@click.option("--timeout", default=300.0, show_default=True, type=float, metavar="SECONDS",
              help="With --wait: exit 1 if the drain has not finished by then (the request "
                   "stays; the controller carries on).")
@click.option("--cancel", is_flag=True,
              help="Withdraw the request: the broker may take partitions again.")
@output_option
@zookeeper_options(required=True)
def drain(broker: int, wait: bool, timeout: float, cancel: bool, output: str, zookeeper: str,
          root: str) -> None:
    """Move every partition off BROKER (by id) for a clean scale-in.

    Writes a drain request to ZooKeeper; the active controller moves the broker's partitions
    to the other brokers the way a SIGTERM drain does (each is flushed and released before
    its new owner opens it) and gives the broker nothing new. The request is persistent: it
    outlives restarts of the broker until it is cancelled with --cancel. Stop the broker once
    the drain is done; cancel the request before the broker id is used again.

    \b
    Examples:
      bmq cluster drain 3 --zookeeper zk:2181               # waits, then lists what moved
      bmq cluster drain 3 --zookeeper zk:2181 --no-wait
      bmq cluster drain 3 --zookeeper zk:2181 --cancel      # take partitions again
    """
    from bmq.metadata.zookeeper.state import (
        broker_list,
        cancel_drain,
        drain_requests,
        partition_states,
        request_drain,
    )

    if timeout <= 0:
        raise click.BadParameter("must be positive", param_hint="--timeout")
    with open_zookeeper(zookeeper, root) as (zk, paths):
        if cancel:
            if cancel_drain(zk, paths, broker):
                say(f"drain of broker {broker} cancelled: the controller may give it "
                    "partitions again")
            else:
                say(f"broker {broker} had no drain request")
            return
        registered = {b for b, *_ in broker_list(zk, paths)}
        if broker not in registered:
            # As Kafka's tools refuse an unknown broker id: a typo must not leave a request
            # behind that silently starves a broker started later with that id.
            fail(f"broker {broker} is not registered (brokers: "
                 f"{', '.join(map(str, sorted(registered))) or 'none'}): nothing to drain")
        others = registered - drain_requests(zk, paths) - {broker}
        if not others:
            fail(f"no other broker is registered and not draining: nothing could take broker "
                 f"{broker}'s partitions")
        before = {(s.topic, s.partition): s for s in partition_states(zk, paths)
                  if s.owner == broker}
        new = request_drain(zk, paths, broker)
        say(f"{'asked' if new else 'already asked'} the controller to move broker {broker}'s "
            f"{counted(len(before), 'partition')} away")
        if not wait:
            return
        deadline = time.monotonic() + timeout
        while True:
            states = {(s.topic, s.partition): s for s in partition_states(zk, paths)}
            left = [s for s in states.values() if s.owner == broker]
            moved = [states[tp] for tp in before if tp in states]
            done = not left and all(s.state == "writable" for s in moved)
            if done or time.monotonic() >= deadline:
                break
            time.sleep(POLL_S)
    rows = [{"topic": s.topic, "partition": s.partition, "from": broker, "to": s.owner,
             "epoch": s.epoch, "state": s.state} for s in moved]
    if output == "json":
        print_json({"broker": broker, "drained": done, "moved": rows,
                    "remaining": [{"topic": s.topic, "partition": s.partition,
                                   "state": s.state} for s in left]})
    else:
        print_table(None, ("TOPIC", "PARTITION", "FROM", "TO", "EPOCH", "STATE"),
                    [(r["topic"], r["partition"], r["from"], r["to"], r["epoch"], r["state"])
                     for r in rows], right=("PARTITION", "FROM", "TO", "EPOCH"))
    if not done:
        fail(f"broker {broker} still owns {counted(len(left), 'partition')} after {timeout:g} s "
             "(the request stays; run again to keep waiting, or --cancel)")
    say(f"broker {broker} owns no partitions: {len(rows)} moved")
