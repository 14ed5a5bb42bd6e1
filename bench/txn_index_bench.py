"""What the aborted-transaction index costs a partition with many aborted transactions: the
owner's read_committed fetch near the end of the log (``aborted_between``), the tail it
publishes with each notice of new data (``tail_txn_state``), and a reader elsewhere applying
that tail (``PublishedTxns.apply_tail``, which merges the tail's entries into its index).

    .venv/bin/python -m bench.txn_index_bench [--aborted 10000] [--rounds 2000]

Each transaction is 10 records and its ABORT marker; the fetch asks for the last 1,000 offsets,
the tail carries the entries since the last published state (the last 50 transactions) and one
new one each round.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from bmq.storage.log.published_txns import PublishedTxns, tail_txn_state
from bmq.storage.producer_state import TXN_ABORT, TXN_DATA, ProducerStateTable

SPAN = 11           # offsets per transaction: 10 records and the marker


def aborted_partition(count: int) -> ProducerStateTable:
    table = ProducerStateTable()
    for i in range(count):
        base = i * SPAN
        table.record(i % 7, 0, -1, -1, base, base + 9, 0, 0, TXN_DATA)
        table.record(i % 7, 0, -1, -1, base + 10, base + 10, 0, 0, TXN_ABORT)
    return table


def per_call(rounds: int, call: Callable[[int], object]) -> float:
    start = time.perf_counter()
    for i in range(rounds):
        call(i)
    return (time.perf_counter() - start) / rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--aborted", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    table = aborted_partition(args.aborted)
    end = args.aborted * SPAN
    since = end - 50 * SPAN
    fetch = per_call(args.rounds, lambda i: table.aborted_between(end - 1000, end))
    tail = per_call(args.rounds, lambda i: tail_txn_state(table, end, since))

    reader = PublishedTxns()
    reader.apply_tail({"high_watermark": 0, "txn": tail_txn_state(
        aborted_partition(args.aborted), end, 0)})
    resent = tail_txn_state(table, end, since)
    assert resent is not None

    def apply(i: int) -> None:
        new = [[i % 7, end + i * SPAN, end + i * SPAN + 10]]
        reader.apply_tail({"high_watermark": end + (i + 1) * SPAN,
                           "txn": {**resent, "aborted": resent["aborted"] + new}})

    merge = per_call(args.rounds, apply)
    assert len(reader.aborted) == args.aborted + args.rounds
    print(f"{args.aborted} aborted transactions: aborted_between (last 1000 offsets) "
          f"{fetch * 1e6:.1f} us, tail_txn_state {tail * 1e6:.1f} us, "
          f"apply_tail (50 known + 1 new) {merge * 1e6:.1f} us")


if __name__ == "__main__":
    main()
