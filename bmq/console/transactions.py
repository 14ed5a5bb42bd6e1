"""Transactions in the console, asked as `kafka-transactions.sh` asks (confluent-kafka's
AdminClient has none of these calls, so through BMQ's own client layer):

* ListTransactions to every broker (each lists the transactional ids it coordinates), then
  DescribeTransactions at the same broker for the open ones: producer, timeout, start, the
  partitions written. An open transaction is *hanging* when it has been open longer than its
  timeout (its coordinator should have aborted it) or than the page's threshold.
* DescribeProducers at each partition's owner, for the partitions of open transactions and of
  a topic the page names: each active producer and the first offset of its open transaction.
  An open transaction of a producer no coordinator lists is hanging too (`kafka-transactions.sh
  find-hanging`): a read_committed consumer cannot get past it.
* Abort: a transaction its coordinator knows is aborted the way Kafka's
  ``Admin.forceTerminateTransaction`` (KIP-939) does, InitProducerId for its transactional id:
  the coordinator bumps the epoch (fencing the producer, whose next request fails
  PRODUCER_FENCED) and writes ABORT markers to its partitions. A partition's open transaction
  no coordinator knows is aborted as `kafka-transactions.sh abort` does: WriteTxnMarkers with
  the producer's id and epoch to the partition's owner."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bmq.client.requests import Address
from bmq.console.admin import ClusterAdmin, ConsoleError
from bmq.console.messages import parse_number
from bmq.console.pages import ConsolePages
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    InitProducerIdRequest,
    ListTransactionsRequest,
    WriteTxnMarkersRequest,
)
from bmq.protocol.messages.describe_producers_request import TopicRequest
from bmq.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
)

LIST_VERSION = 1
DESCRIBE_VERSION = 0
PRODUCERS_VERSION = 0
INIT_PRODUCER_ID_VERSION = 3     # the first with producer id/epoch (KIP-360); flexible
WRITE_MARKERS_VERSION = 1
OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
# The threshold of the page when none is typed: Kafka's find-hanging default is the broker's
# transaction.max.timeout.ms (15 min); a page is for noticing sooner.
DEFAULT_HANGING_S = 60
# The coordinator answers CONCURRENT_TRANSACTIONS while its ABORT markers are being written.
ABORT_RETRIES = 50
ABORT_RETRY_S = 0.2

Partition = tuple[str, int]


@dataclass(frozen=True)
class Transaction:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: Address
    producer_epoch: int = -1
    timeout_ms: int = -1
    start_ms: int = -1
    partitions: list[Partition] = field(default_factory=list)

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES

    def open_s(self, now_ms: int) -> float | None:
        return (now_ms - self.start_ms) / 1000 if self.is_open and self.start_ms >= 0 else None


@dataclass(frozen=True)
class ProducerRow:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    txn_start_offset: int        # -1: no open transaction
    known: bool                  # its open transaction is one a coordinator lists


@dataclass
class TransactionsView:
    now_ms: int
    threshold_s: int
    transactions: list[Transaction]
    producers: list[ProducerRow]

    def hanging(self, txn: Transaction) -> bool:
        opened = txn.open_s(self.now_ms)
        return opened is not None and (opened * 1000 > txn.timeout_ms
                                       or opened > self.threshold_s)

    @property
    def unknown_open(self) -> list[ProducerRow]:
        """Open transactions on partitions that no coordinator lists: hanging."""
        return [p for p in self.producers if p.txn_start_offset >= 0 and not p.known]


def list_transactions(admin: ClusterAdmin) -> list[Transaction]:
    """Every transactional id, the open ones described by their coordinator."""
    addresses = admin.addresses()
    listed = admin.ask([(a, ListTransactionsRequest(duration_filter=-1)) for a in addresses],
                       LIST_VERSION)
    found: list[Transaction] = []
    for address, answer in zip(addresses, listed, strict=True):
        if answer is None or answer.error_code != ErrorCode.NONE:
            continue
        states = {t.transactional_id: t for t in answer.transaction_states}
        open_ids = sorted(i for i, t in states.items() if t.transaction_state in OPEN_STATES)
        described = {d.transactional_id: d for d in _describe(admin, address, open_ids)}
        for txn_id, listing in states.items():
            d = described.get(txn_id)
            found.append(Transaction(txn_id, listing.producer_id, listing.transaction_state,
                                     address) if d is None else Transaction(
                txn_id, d.producer_id, d.transaction_state, address, d.producer_epoch,
                d.transaction_timeout_ms, d.transaction_start_time_ms,
                sorted((t.topic, p) for t in d.topics for p in t.partitions)))
    return sorted(found, key=lambda t: (not t.is_open, t.transactional_id))


def _describe(admin: ClusterAdmin, address: Address, ids: list[str]) -> list[Any]:
    if not ids:
        return []
    [answer] = admin.ask([(address, DescribeTransactionsRequest(transactional_ids=ids))],
                         DESCRIBE_VERSION)
    return [] if answer is None else [d for d in answer.transaction_states
                                      if d.error_code == ErrorCode.NONE]


def producers(admin: ClusterAdmin, partitions: set[Partition],
              open_pids: set[int]) -> list[ProducerRow]:
    """The active producers of ``partitions``, asked of each one's owner."""
    by_owner: dict[Address, dict[str, list[int]]] = {}
    for (topic, index), owner in admin.owners(partitions).items():
        if owner is not None:
            by_owner.setdefault(owner, {}).setdefault(topic, []).append(index)
    requests = [(owner, DescribeProducersRequest(topics=[
        TopicRequest(name=t, partition_indexes=sorted(p)) for t, p in topics.items()]))
        for owner, topics in by_owner.items()]
    rows = [ProducerRow(topic.name, part.partition_index, p.producer_id, p.producer_epoch,
                        p.last_sequence, p.last_timestamp, p.coordinator_epoch,
                        p.current_txn_start_offset, p.producer_id in open_pids)
            for answer in admin.ask(requests, PRODUCERS_VERSION) if answer is not None
            for topic in answer.topics for part in topic.partitions
            if part.error_code == ErrorCode.NONE for p in part.active_producers]
    return sorted(rows, key=lambda r: (r.topic, r.partition, r.producer_id))


def view(admin: ClusterAdmin, threshold_s: int, topic: str | None) -> TransactionsView:
    txns = list_transactions(admin)
    open_txns = [t for t in txns if t.is_open]
    wanted = {p for t in open_txns for p in t.partitions}
    if topic:
        count = admin.partition_counts().get(topic)
        if count is None:
            raise ConsoleError(f"no topic named {topic!r}")
        wanted |= {(topic, index) for index in range(count)}
    rows = producers(admin, wanted, {t.producer_id for t in open_txns})
    return TransactionsView(int(time.time() * 1000), threshold_s, txns, rows)


def abort_transaction(admin: ClusterAdmin, transactional_id: str) -> Transaction:
    """Aborts the open transaction of ``transactional_id`` through its coordinator (fencing
    its producer); ConsoleError, changing nothing, when it has none open."""
    txn = next((t for t in list_transactions(admin)
                if t.transactional_id == transactional_id), None)
    if txn is None:
        raise ConsoleError(f"no transactional id {transactional_id!r}: nothing was aborted")
    if not txn.is_open:
        raise ConsoleError(f"transaction {transactional_id!r} is not open (state {txn.state}): "
                           "nothing was aborted")
    request = InitProducerIdRequest(transactional_id=transactional_id,
                                    transaction_timeout_ms=txn.timeout_ms)
    for _ in range(ABORT_RETRIES):
        [answer] = admin.ask([(txn.coordinator, request)], INIT_PRODUCER_ID_VERSION)
        code = ErrorCode.REQUEST_TIMED_OUT if answer is None else ErrorCode(answer.error_code)
        if code == ErrorCode.NONE:
            return txn
        if code != ErrorCode.CONCURRENT_TRANSACTIONS:
            raise ConsoleError(f"cannot abort {transactional_id!r}: {code.name}")
        time.sleep(ABORT_RETRY_S)
    raise ConsoleError(f"cannot abort {transactional_id!r}: its coordinator is still "
                       "writing markers; look again in a moment")


def abort_on_partition(admin: ClusterAdmin, topic: str, partition: int,
                       producer_id: int) -> ProducerRow:
    """Writes an ABORT marker of ``producer_id``'s open transaction on ``topic[partition]``
    (`kafka-transactions.sh abort`); ConsoleError, changing nothing, when it has none open."""
    rows = producers(admin, {(topic, partition)}, set())
    row = next((r for r in rows if r.producer_id == producer_id and r.txn_start_offset >= 0),
               None)
    if row is None:
        raise ConsoleError(f"producer {producer_id} has no open transaction on "
                           f"{topic}[{partition}]: nothing was aborted")
    owner = admin.owners({(topic, partition)})[(topic, partition)]
    if owner is None:
        raise ConsoleError(f"{topic}[{partition}] has no owner now: nothing was aborted")
    marker = WritableTxnMarker(producer_id=producer_id, producer_epoch=row.producer_epoch,
                               transaction_result=False,
                               coordinator_epoch=max(row.coordinator_epoch, 0),
                               topics=[WritableTxnMarkerTopic(name=topic,
                                                              partition_indexes=[partition])])
    [answer] = admin.ask([(owner, WriteTxnMarkersRequest(markers=[marker]))],
                         WRITE_MARKERS_VERSION)
    if answer is None:
        raise ConsoleError(f"the owner of {topic}[{partition}] did not answer")
    code = ErrorCode(answer.markers[0].topics[0].partitions[0].error_code)
    if code != ErrorCode.NONE:
        raise ConsoleError(f"cannot abort on {topic}[{partition}]: {code.name}")
    return row


def routes(console: ConsolePages) -> list[Route]:
    async def transactions(request: Request, error: str | None = None) -> Response:
        query = request.query_params
        topic = query.get("topic", "").strip() or None
        try:
            threshold = parse_number(query.get("older_than"), "threshold", DEFAULT_HANGING_S)
            state = await console._call(view, console.admin, threshold, topic)
        except ConsoleError as failure:
            return console.page(request, "transactions.html", status=400, state=None,
                                topic=topic, error=str(failure))
        return console.page(request, "transactions.html", status=400 if error else 200,
                            state=state, topic=topic, error=error)

    async def abort(request: Request) -> Response:
        form = await console._form(request)
        if form is None:
            return console._refused(request)
        try:
            if form.get("transactional_id"):
                txn = await console._call(abort_transaction, console.admin,
                                          form["transactional_id"])
                notice = (f"aborted the transaction of {txn.transactional_id} (producer "
                          f"{txn.producer_id}; {len(txn.partitions)} partition(s)); its "
                          "producer is fenced")
            else:
                topic = form.get("topic", "")
                partition = parse_number(form.get("partition"), "partition", 0)
                pid = parse_number(form.get("producer_id"), "producer id", -1)
                row = await console._call(abort_on_partition, console.admin, topic,
                                          partition, pid)
                notice = (f"wrote an ABORT marker of producer {row.producer_id} (epoch "
                          f"{row.producer_epoch}) on {topic}[{partition}]")
        except ConsoleError as failure:
            return await transactions(request, str(failure))
        return console._back(request.url_for("transactions"), notice)

    return [Route("/transactions", transactions, name="transactions"),
            Route("/transactions/abort", abort, methods=["POST"], name="abort_transaction")]
