"""Proxy-tier benchmark: end-to-end latency and catch-up consumption through a `bmq proxy`, on a
throw-away ZooKeeper + controller + 3 brokers (file:// shared storage) + 1 proxy, with the
catch-up figure of `bmq serve` beside it for comparison.

    .venv/bin/python -m bench.proxy [--rate 10] [--duration 20] [--messages 300000]

Runs ``python -m bench`` (the same tool as everything else in bench/) against the proxy:
``--mode e2e`` at ``--rate`` MB/s (produce acknowledged -> consumer delivery; first against the
brokers before the proxy starts, for comparison), then
``--mode both`` (produce, then consume the whole topic: the catch-up read), and the latter once
more against a spawned `bmq serve`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.cluster.conftest import Cluster, _env
from tests.cluster.zookeeper import ZooKeeper
from tests.proxy.conftest import ProxyProcess


def _bench(*args: str) -> None:
    cmd = [sys.executable, "-m", "bench", "--no-progress", *args]
    print("$", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=10.0, help="e2e rate in MB/s [10]")
    parser.add_argument("--duration", type=float, default=20.0, help="e2e seconds [20]")
    parser.add_argument("--messages", type=int, default=300_000,
                        help="messages for the catch-up runs [300000]")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bmq-bench-proxy-") as tmp:
        base = Path(tmp)
        zk = ZooKeeper.start(base / "zk")
        (base / "shared").mkdir()
        cluster = Cluster(base, zk, f"file://{base / 'shared'}", {}, _env())
        proxy = ProxyProcess(base / "proxy", cluster)
        try:
            cluster.start_controller()
            for broker_id in (1, 2, 3):
                cluster.add_broker(broker_id)
            # First without a proxy (clients on the brokers), for comparison: once a proxy
            # runs, Metadata from brokers too sends clients to it.
            _bench("--bootstrap", cluster.bootstrap, "--mode", "e2e", "--rate", str(args.rate),
                   "--duration", str(args.duration), "--topic", "direct", "--partitions", "6")
            proxy.start()
            _bench("--bootstrap", proxy.bootstrap, "--mode", "e2e", "--rate", str(args.rate),
                   "--duration", str(args.duration), "--topic", "e2e", "--partitions", "6")
            _bench("--bootstrap", proxy.bootstrap, "--mode", "both", "--messages",
                   str(args.messages), "--topic", "catchup", "--partitions", "6")
            print(f"proxy: cache hits {proxy.metric('bmq_proxy_cache_hits_total'):.0f}, "
                  f"misses {proxy.metric('bmq_proxy_cache_misses_total'):.0f}, storage reads "
                  f"{proxy.metric('bmq_proxy_storage_reads_total'):.0f}")
        finally:
            proxy.cleanup()
            cluster.cleanup()
            zk.stop()
    _bench("--spawn-server", "--mode", "both", "--messages", str(args.messages),
           "--partitions", "6")


if __name__ == "__main__":
    main()
