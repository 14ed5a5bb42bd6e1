"""`bmq txn ...`: list and describe transactions (as Kafka's kafka-transactions.sh does):
ListTransactions to every broker (each answers for the transactional ids it coordinates),
FindCoordinator + DescribeTransactions for one id, through ``bmq.commands.wire`` (the client
library has no admin calls for them)."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from bmq.commands.common import (
    Connection,
    connection_options,
    fail,
    output_option,
    print_json,
    print_table,
)
from bmq.commands.wire import brokers, call
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import (
    DescribeTransactionsRequest,
    FindCoordinatorRequest,
    ListTransactionsRequest,
)

LIST_VERSION = 1
DESCRIBE_VERSION = 0
FIND_VERSION = 4
KEY_TYPE_TRANSACTION = 1


@click.group()
def txn() -> None:
    """List and describe transactions.

    \b
    Examples:
      bmq txn list
      bmq txn list --state Ongoing
      bmq txn describe payments-processor-1
    """


@txn.command("list")
@click.option("--state", "states", multiple=True,
              help="Only transactions in this state (Ongoing, PrepareCommit, CompleteCommit...;"
                   " repeatable).")
@output_option
@connection_options
def list_(conn: Connection, states: tuple[str, ...], output: str) -> None:
    """List the transactional ids every broker coordinates, with their state."""
    rows = []
    for address in brokers(conn):
        answer = call(conn, address, ListTransactionsRequest(state_filters=list(states),
                                                              duration_filter=-1),
                       LIST_VERSION)
        if answer.error_code != ErrorCode.NONE:
            fail(f"ListTransactions: {ErrorCode(answer.error_code).name}")
        if answer.unknown_state_filters:
            fail(f"unknown states: {', '.join(answer.unknown_state_filters)}")
        rows += [(t.transactional_id, t.producer_id, t.transaction_state)
                 for t in answer.transaction_states]
    rows.sort()
    if output == "json":
        print_json([{"transactional_id": i, "producer_id": p, "state": s} for i, p, s in rows])
    else:
        print_table(None, ["TRANSACTIONAL ID", "PRODUCER ID", "STATE"], rows,
                    right=["PRODUCER ID"])


@txn.command()
@click.argument("transactional_id")
@output_option
@connection_options
def describe(conn: Connection, transactional_id: str, output: str) -> None:
    """The state, producer, timeout and partitions of one transactional id."""
    found = call(conn, brokers(conn)[0], FindCoordinatorRequest(
        key_type=KEY_TYPE_TRANSACTION, coordinator_keys=[transactional_id]), FIND_VERSION)
    (coordinator,) = found.coordinators
    if coordinator.error_code != ErrorCode.NONE:
        fail(f"no coordinator for {transactional_id!r}: "
             f"{ErrorCode(coordinator.error_code).name}")
    answer = call(conn, (coordinator.host, coordinator.port),
                   DescribeTransactionsRequest(transactional_ids=[transactional_id]),
                   DESCRIBE_VERSION)
    (state,) = answer.transaction_states
    if state.error_code != ErrorCode.NONE:
        fail(f"{transactional_id!r}: {ErrorCode(state.error_code).name}")
    started = None
    if state.transaction_start_time_ms >= 0:
        started = datetime.fromtimestamp(state.transaction_start_time_ms / 1000,
                                         UTC).isoformat(timespec="seconds")
    doc = {"transactional_id": transactional_id, "coordinator": coordinator.node_id,
           "state": state.transaction_state, "producer_id": state.producer_id,
           "producer_epoch": state.producer_epoch,
           "timeout_ms": state.transaction_timeout_ms, "started": started,
           "partitions": sorted(f"{t.topic}-{p}" for t in state.topics for p in t.partitions)}
    if output == "json":
        print_json(doc)
        return
    print_table(None, ["FIELD", "VALUE"],
                [(k, ", ".join(v) if isinstance(v, list) else v) for k, v in doc.items()])
