"""An Elle-style checker of transactions over logs (Kafka's partitions), after Jepsen's Kafka test
and Elle's list-append: each key is a partition, each committed transaction appends unique values
to some keys and may read (poll) some; offsets give each key's version order.

Anomalies (Adya's and Elle's names):

- ``G1a`` aborted read: a read (in a transaction, or the final read) sees a value an aborted
  transaction wrote;
- ``precommitted-read``: a transaction's read_committed poll sees its own, not yet committed,
  value;
- ``G1b`` intermediate read: a transaction's last read of a key is a value another transaction
  appended before appending more to that key;
- ``lost-update``: two committed transactions read the same last version of a key and both
  appended to it;
- ``lost-write``: a committed transaction's value missing from the final read;
- ``partial-transaction``: some but not all of a committed (or unknown) transaction's values in
  the final read;
- ``inconsistent-offsets`` (two values at one offset of a key) and ``duplicate`` (one value at
  two offsets);
- ``nonmonotonic-send``: a producer's appends to a key acknowledged at offsets out of the order
  it sent them in;
- cycles in the dependency graph of committed transactions, found among its strongly connected
  components: ``G0`` (ww edges only), ``G1c`` (ww and wr, at least one wr), ``G-single`` (exactly
  one rw) and ``G2`` (rw edges, not G-single).

Edges: T1 -ww-> T2 when T2 appended the next value after T1's in a key's version order (only
with ``ww_deps``); T1 -wr-> T2 when T2 read a value T1 appended; T1 -rw-> T2 when T2 appended
the value next after T1's last read of a key.

Not every anomaly breaks Kafka's promises: its transactions do not isolate writes (concurrent
transactions interleave their records in a partition, so ww edges make G0 and G1c cycles
normal), a poll is no snapshot (it may stop mid-way through a transaction's records, so G1b,
lost updates and rw cycles are normal too). Jepsen's Kafka test allows the same (its
``allowed-error-types``); the caller passes what it allows, and those are counted in the stats
instead of failing the verdict.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import networkx as nx

from tests.faults.history import Outcome
from tests.faults.workload import Verdict

EXAMPLES = 10                 # examples kept per anomaly kind

Key = int
Value = str
Log = dict[Key, list[tuple[int, Value]]]      # key -> [(offset, value)] as a consumer read it


@dataclass(frozen=True)
class Txn:
    """One transaction: ``status`` ``ok`` (committed), ``fail`` (aborted) or ``info``
    (unknown); ``appends`` are (key, value, acknowledged offset or None) in send order,
    ``reads`` (key, offset, value) in poll order."""

    index: int
    process: str
    status: Outcome
    appends: tuple[tuple[Key, Value, int | None], ...] = ()
    reads: tuple[tuple[Key, int, Value], ...] = ()

    def last_reads(self) -> dict[Key, tuple[int, Value]]:
        """Per key, the read at the highest offset: what the transaction saw of that key."""
        last: dict[Key, tuple[int, Value]] = {}
        for key, offset, value in self.reads:
            if key not in last or offset > last[key][0]:
                last[key] = (offset, value)
        return last


class Anomalies:
    """What a checker found: every kind counted, the first EXAMPLES of each kept."""

    def __init__(self) -> None:
        self.found: dict[str, list[Any]] = defaultdict(list)
        self.counts: dict[str, int] = defaultdict(int)

    def add(self, kind: str, example: Any) -> None:
        self.counts[kind] += 1
        if len(self.found[kind]) < EXAMPLES:
            self.found[kind].append(example)

    def verdict(self, workload: str, allowed: frozenset[str], stats: dict[str, Any],
                tested: bool) -> Verdict:
        """Invalid if anything not allowed was found, or nothing was tested."""
        forbidden = {k: v for k, v in self.found.items() if k not in allowed}
        stats["allowed-anomalies"] = {k: n for k, n in self.counts.items() if k in allowed}
        return Verdict(workload, tested and not forbidden, forbidden, stats)


def offset_anomalies(found: Anomalies, positions: Iterable[tuple[Key, int, Value]],
                     renumbered: Callable[[list[tuple[Key, int]]], bool] | None = None
                     ) -> dict[Key, list[Value]]:
    """Records ``inconsistent-offsets`` and ``duplicate`` among every (key, offset, value)
    observed (``duplicate-renumbered`` for the copies ``renumbered`` says a client wrote under
    two identities, ``tests.faults.writers``); returns each key's version order: its values by
    offset."""
    at: dict[tuple[Key, int], set[Value]] = defaultdict(set)
    where: dict[Value, set[tuple[Key, int]]] = defaultdict(set)
    for key, offset, value in positions:
        at[key, offset].add(value)
        where[value].add((key, offset))
    for (key, offset), values in sorted(at.items()):
        if len(values) > 1:
            found.add("inconsistent-offsets", {"key": key, "offset": offset,
                                               "values": sorted(values)})
    for value, places in sorted(where.items()):
        if len(places) > 1:
            kind = "duplicate-renumbered" if renumbered is not None and renumbered(
                sorted(places)) else "duplicate"
            found.add(kind, {"value": value, "at": sorted(places)})
    order: dict[Key, list[Value]] = defaultdict(list)
    for (key, _offset), values in sorted(at.items()):
        order[key].append(min(values))
    return order


def _read_anomalies(found: Anomalies, txns: list[Txn], writer: dict[Value, Txn],
                    final: Log) -> None:
    for txn in txns:
        for key, offset, value in txn.reads:
            source = writer.get(value)
            if source is not None and source.status == "fail":
                found.add("G1a", {"reader": txn.index, "key": key, "offset": offset,
                                  "value": value, "writer": source.index})
            if source is txn:
                found.add("precommitted-read", {"txn": txn.index, "key": key, "value": value})
        for key, (offset, value) in txn.last_reads().items():
            source = writer.get(value)
            if source is None or source is txn:
                continue
            appended = [v for k, v, _ in source.appends if k == key]
            if value in appended and value != appended[-1]:
                found.add("G1b", {"reader": txn.index, "key": key, "offset": offset,
                                  "value": value, "writer": source.index})
    for key, records in sorted(final.items()):
        for offset, value in records:
            source = writer.get(value)
            if source is not None and source.status == "fail":
                found.add("G1a", {"reader": "final-read", "key": key, "offset": offset,
                                  "value": value, "writer": source.index})


def _send_order_anomalies(found: Anomalies, txns: list[Txn]) -> None:
    """One producer's appends to a key, in the order it sent them (within a transaction and
    across its transactions), must have increasing offsets."""
    last: dict[tuple[str, Key], tuple[int, Value]] = {}
    for txn in sorted(txns, key=lambda t: t.index):
        for key, value, offset in txn.appends:
            if offset is None:
                continue
            before = last.get((txn.process, key))
            if before is not None and offset <= before[0]:
                found.add("nonmonotonic-send", {"process": txn.process, "txn": txn.index,
                                                "key": key, "before": before,
                                                "then": (offset, value)})
            last[txn.process, key] = (offset, value)


def _lost_updates(found: Anomalies, txns: list[Txn]) -> None:
    """Committed transactions that read the same last version of a key and appended to it."""
    by_version: dict[tuple[Key, Value], list[int]] = defaultdict(list)
    for txn in txns:
        if txn.status != "ok":
            continue
        written = {k for k, _, _ in txn.appends}
        for key, (_offset, value) in txn.last_reads().items():
            if key in written:
                by_version[key, value].append(txn.index)
    for (key, value), readers in sorted(by_version.items()):
        if len(readers) > 1:
            found.add("lost-update", {"key": key, "read": value, "txns": readers})


def _final_anomalies(found: Anomalies, txns: list[Txn], final: Log) -> set[int]:
    """Lost and partial transactions; returns the indexes of transactions visible in the
    final read (committed, whatever their clients were told)."""
    visible_values = {value for records in final.values() for _, value in records}
    visible: set[int] = set()
    for txn in txns:
        values = [v for _, v, _ in txn.appends]
        seen = [v for v in values if v in visible_values]
        if seen:
            visible.add(txn.index)
        if txn.status == "ok":
            for value in values:
                if value not in visible_values:
                    found.add("lost-write", {"txn": txn.index, "value": value})
        if txn.status != "fail" and seen and len(seen) < len(values):
            found.add("partial-transaction", {"txn": txn.index, "status": txn.status,
                                              "visible": seen,
                                              "missing": sorted(set(values) - set(seen))})
    return visible


def dependency_graph(txns: list[Txn], order: dict[Key, list[Value]],
                     writer: dict[Value, Txn], ww_deps: bool) -> nx.DiGraph:
    """Committed transactions and their ww (with ``ww_deps``), wr and rw edges; each edge's
    ``rels`` is the set of its kinds, ``keys`` the keys they came from."""
    graph = nx.DiGraph()
    graph.add_nodes_from(t.index for t in txns)

    def link(a: Txn, b: Txn, rel: str, key: Key) -> None:
        if a is not b:
            if not graph.has_edge(a.index, b.index):
                graph.add_edge(a.index, b.index, rels=set(), keys=set())
            graph[a.index][b.index]["rels"].add(rel)
            graph[a.index][b.index]["keys"].add(key)

    members = {t.index for t in txns}
    committed = {key: [v for v in values if v in writer and writer[v].index in members]
                 for key, values in order.items()}
    if ww_deps:
        for key, values in committed.items():
            for before, after in itertools.pairwise(values):
                link(writer[before], writer[after], "ww", key)
    for txn in txns:
        for key, _offset, value in txn.reads:
            if value in writer and writer[value].index in members:
                link(writer[value], txn, "wr", key)
        for key, (_offset, value) in txn.last_reads().items():
            values = committed.get(key, [])
            if value in values and values.index(value) + 1 < len(values):
                link(txn, writer[values[values.index(value) + 1]], "rw", key)
    return graph


def _only(graph: nx.DiGraph, rels: set[str]) -> nx.DiGraph:
    return nx.subgraph_view(graph, filter_edge=lambda a, b: bool(graph[a][b]["rels"] & rels))


def _closing(graph: nx.DiGraph, sub: nx.DiGraph, through: str,
             rest: nx.DiGraph) -> Iterator[list[int]]:
    """Cycles that take one ``through`` edge a -> b of ``sub`` and come back from b to a in
    ``rest``. (An edge of ``rest`` closes one only inside one of its components: checked
    first, as searching paths from every edge of a large component is slow.)"""
    component = {node: i for i, nodes in enumerate(nx.strongly_connected_components(rest))
                 for node in nodes}
    for a, b in sub.edges:
        if through not in graph[a][b]["rels"]:
            continue
        if rest.has_edge(a, b) and component[a] != component[b]:
            continue
        if nx.has_path(rest, b, a):
            yield [a, *nx.shortest_path(rest, b, a)]


def _steps(graph: nx.DiGraph, cycle: list[int]) -> list[str]:
    return [f"T{a} -{'+'.join(sorted(graph[a][b]['rels']))}"
            f"{sorted(graph[a][b]['keys'])}-> T{b}" for a, b in itertools.pairwise(cycle)]


def cycle_anomalies(found: Anomalies, graph: nx.DiGraph) -> None:
    """One example of each kind of cycle per strongly connected component."""
    for component in nx.strongly_connected_components(graph):
        if len(component) < 2:
            continue
        sub = graph.subgraph(component)
        ww, ww_wr = _only(sub, {"ww"}), _only(sub, {"ww", "wr"})
        try:
            cycle = [a for a, _ in nx.find_cycle(ww)]
            found.add("G0", _steps(graph, [*cycle, cycle[0]]))
        except nx.NetworkXNoCycle:
            pass
        for kind, through, rest in (("G1c", "wr", ww_wr), ("G-single", "rw", ww_wr),
                                    ("G2", "rw", sub)):
            example = next(_closing(graph, sub, through, rest), None)
            if example is not None:
                found.add(kind, _steps(graph, [*example]))
                if kind == "G-single":
                    break             # a G2 here would be the same cycle, or a longer one


def check(workload: str, txns: list[Txn], final: Log, *, ww_deps: bool = False,
          allowed: frozenset[str] = frozenset(), found: Anomalies | None = None) -> Verdict:
    """Judge ``txns`` against ``final``, a read_committed read of every key after the run
    (adding to what ``found`` holds already)."""
    found = Anomalies() if found is None else found
    writer = {value: txn for txn in txns for _, value, _ in txn.appends}
    positions = [(key, offset, value) for key, records in final.items()
                 for offset, value in records]
    positions += [(key, offset, value) for txn in txns for key, value, offset in txn.appends
                  if offset is not None]
    positions += [read for txn in txns for read in txn.reads]
    order = offset_anomalies(found, positions)
    _read_anomalies(found, txns, writer, final)
    _send_order_anomalies(found, txns)
    _lost_updates(found, txns)
    visible = _final_anomalies(found, txns, final)
    graph_txns = [t for t in txns if t.status == "ok" or t.index in visible]
    cycle_anomalies(found, dependency_graph(graph_txns, order, writer, ww_deps))
    stats = {
        "ok-txns": sum(t.status == "ok" and bool(t.appends) for t in txns),
        "read-only-txns": sum(not t.appends for t in txns),
        "aborted-txns": sum(t.status == "fail" for t in txns),
        "unknown-txns": sum(t.status == "info" for t in txns),
        "reads": sum(len(t.reads) for t in txns),
        "final-values": sum(len(records) for records in final.values()),
    }
    return found.verdict(workload, allowed, stats, tested=stats["ok-txns"] > 0)
