"""How fast one process takes over partitions on storage, as a broker does a killed one's.

    python -m bench.takeover [--partitions 2000] [--threads 1,16] [--runs 3]

Each partition is written by an epoch-1 owner (one batch flushed, then abandoned as a kill -9
leaves it: its checkpoint does not know the batch), then opened by epoch 2 with ``--threads``
worker threads, as a broker's executor opens the partitions the controller gave it. Prints
partitions a second and the process's CPU time a takeover (user and system: on a virtual disk
the syncs and the file creations are CPU in the guest's kernel). The end-to-end figure, with
ZooKeeper, the controller and three brokers, is ``bench.scale_cluster``'s.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from bmq.protocol.records import read_header
from bmq.storage import LocalStorage, LogConfig, PartitionLog
from tests.storage.batches import make_batch

CONFIG = LogConfig(publish_interval_ms=3_600_000)   # the first owner's checkpoint stays behind


def killed_owner(storage: LocalStorage, index: int) -> None:
    log = PartitionLog.open(storage, "t", index, CONFIG, epoch=1)
    batch = bytearray(make_batch([b"x" * 100]))
    log.append(memoryview(batch), [read_header(batch)], 0)
    log.flush()
    log.abandon()


def take_over(storage: LocalStorage, index: int) -> None:
    PartitionLog.open(storage, "t", index, CONFIG, epoch=2).close()


def cpu_s() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def run_once(partitions: int, threads: int) -> tuple[float, float, float]:
    """Partitions a second, and user and system CPU ms a takeover."""
    root = tempfile.mkdtemp(prefix="bmq-takeover-bench-")
    try:
        storage = LocalStorage(root)
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: killed_owner(storage, i), range(partitions)))
        user, system = cpu_s()
        began = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda i: take_over(storage, i), range(partitions)))
        elapsed = time.perf_counter() - began
        user_after, system_after = cpu_s()
        return (partitions / elapsed, (user_after - user) * 1000 / partitions,
                (system_after - system) * 1000 / partitions)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--threads", default="1,16", help="comma-separated [1,16]")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print("| threads | partitions/s | user ms a takeover | system ms a takeover |")
    print("| --- | --- | --- | --- |")
    for threads in (int(t) for t in args.threads.split(",")):
        runs = [run_once(args.partitions, threads) for _ in range(args.runs)]
        best = max(runs)
        print(f"| {threads} | {best[0]:.0f} (of {', '.join(f'{r[0]:.0f}' for r in runs)}) "
              f"| {best[1]:.2f} | {best[2]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
