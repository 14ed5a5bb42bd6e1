"""The same workload on each shared storage a cluster can use: a directory (``file://``), S3
(SeaweedFS) and HDFS (MiniDFSCluster, replication 3): produce and consume MB/s and the acks=all
latency of one broker, and on HDFS the NameNode calls and DataNode fsyncs per MB written.

    .venv/bin/python -m bench.storage_compare [--storage file,s3,hdfs] [--messages 200000]
        [--message-size 1024] [--partitions 8] [--rate 5] [--duration 15] [--json OUT]

Each storage gets a throw-away ZooKeeper, a controller and one broker (``tests/cluster``'s
set-up, BMQ's default settings), then ``python -m bench --mode both --acks all`` runs against
it (as fast as the producer can: its latency is mostly time queued in the client), then
``--mode e2e`` at ``--rate`` MB/s for ``--duration`` s: the acks=all latency of a paced producer
(what the storage adds) and the time from produce to a tailing consumer. The NameNode's RPC
count (its ``RpcActivity`` bean) and each DataNode's FsyncCount come from their JMX servlets,
read before and after the first produce phase.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from bench.hdfs_clients import datanode_fsyncs
from tests.cluster.conftest import Cluster, _env
from tests.cluster.zookeeper import ZooKeeper
from tests.hdfs import MiniHdfs
from tests.seaweedfs import SeaweedFS

MB = 1e6
TOPIC = "bmq-bench"     # the bench's default topic
PACED_TOPIC = "bmq-bench-paced"


def namenode_calls(http_address: str) -> int:
    """RPC calls the NameNode has served (all its client ports), from its JMX servlet (the
    caller waits out the metrics cache, as ``datanode_fsyncs`` does)."""
    query = "Hadoop:service=NameNode,name=RpcActivityForPort*"
    with urllib.request.urlopen(f"http://{http_address}/jmx?qry={query}", timeout=30) as answer:
        beans = json.load(answer)["beans"]
    return sum(int(bean.get("RpcProcessingTimeNumOps", 0)) for bean in beans)


def run_workload(bootstrap: str, args: argparse.Namespace, out: Path,
                 workload: list[str]) -> dict[str, Any]:
    subprocess.run([sys.executable, "-m", "bench", "--bootstrap", bootstrap, "--acks", "all",
                    "--message-size", str(args.message_size), "--partitions",
                    str(args.partitions), "--no-progress", "--json", str(out), *workload],
                   check=True, stdout=sys.stderr)
    doc: dict[str, Any] = json.loads(out.read_text())
    return {r["phase"]: r for r in doc["results"]}


def create_topic(cluster: Cluster, topic: str, partitions: int) -> None:
    """Created first and waited for: a cluster opens a new topic's partitions a moment after
    CreateTopics answers (the bench itself expects a ready topic)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
    cluster.wait_writable(topic, timeout=120)


def bench_storage(kind: str, base: Path, args: argparse.Namespace) -> dict[str, Any]:
    zk = ZooKeeper.start(base / "zk")
    hdfs = seaweed = None
    try:
        options: dict[str, str] = {}
        if kind == "file":
            (base / "shared").mkdir()
            url = f"file://{base / 'shared'}"
        elif kind == "s3":
            seaweed = SeaweedFS.start(base / "s3")
            url, options = seaweed.url("bench"), seaweed.storage_options()
        else:
            hdfs = MiniHdfs.start(base / "hdfs")
            url = hdfs.url("bench")
            options = hdfs.storage_options()
        env = _env()
        env.pop("BMQ_ZOOKEEPER_SESSION_TIMEOUT_MS")     # BMQ's defaults, not the tests'
        env.pop("BMQ_LOG_CHECKPOINT_INTERVAL_MS")
        (base / "c").mkdir()
        cluster = Cluster(base / "c", zk, url, options, env)
        try:
            cluster.start_controller()
            cluster.add_broker(1)
            before = None
            if hdfs is not None:
                jmx = hdfs.info["datanodes"][0]["http"]
                before = (datanode_fsyncs(jmx), namenode_calls(hdfs.http_address))
            create_topic(cluster, TOPIC, args.partitions)
            phases = run_workload(cluster.bootstrap, args, base / "bench.json",
                                  ["--mode", "both", "--messages", str(args.messages)])
            result: dict[str, Any] = {"storage": kind, **phases}
            if hdfs is not None and before is not None:
                after = (datanode_fsyncs(jmx), namenode_calls(hdfs.http_address))
                written_mb = phases["produce"]["bytes"] / MB
                fsyncs = sum(after[0].values()) - sum(before[0].values())
                # (the consume phase reads through hdfs-native too: its calls count here)
                result["namenode_calls_per_mb"] = round((after[1] - before[1]) / written_mb, 1)
                result["datanode_fsyncs_per_mb"] = round(fsyncs / written_mb, 1)
            create_topic(cluster, PACED_TOPIC, args.partitions)
            result.update(run_workload(
                cluster.bootstrap, args, base / "paced.json",
                ["--mode", "e2e", "--topic", PACED_TOPIC, "--rate", str(args.rate),
                 "--duration", str(args.duration)]))
            return result
        finally:
            cluster.cleanup()
    finally:
        if hdfs is not None:
            hdfs.stop()
        if seaweed is not None:
            seaweed.stop()
        zk.stop()


def _p50_p99(phase: dict[str, Any]) -> str:
    latency = phase.get("latency_ms") or {}
    return (f"p50 {latency.get('p50', float('nan')):.1f} ms, "
            f"p99 {latency.get('p99', float('nan')):.1f} ms")


def describe(result: dict[str, Any]) -> str:
    produce, consume = result["produce"], result.get("consume", {})
    paced = result.get("e2e-produce", {})
    line = (f"{result['storage']:>5}: produce {produce['mb_per_s']:.1f} MB/s (flat out: "
            f"{_p50_p99(produce)}), consume {consume.get('mb_per_s', 0):.1f} MB/s; paced at "
            f"{paced.get('mb_per_s', 0):.1f} MB/s: acks=all {_p50_p99(paced)}, produce to "
            f"consumer {_p50_p99(result.get('e2e', {}))}")
    if "namenode_calls_per_mb" in result:
        line += (f"; NameNode calls {result['namenode_calls_per_mb']}/MB, DataNode fsyncs "
                 f"{result['datanode_fsyncs_per_mb']}/MB")
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storage", default="file,s3,hdfs")
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--message-size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--rate", type=float, default=5.0, help="MB/s of the paced run [5]")
    parser.add_argument("--duration", type=float, default=15.0, help="s of the paced run [15]")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = []
    for kind in args.storage.split(","):
        base = Path(tempfile.mkdtemp(prefix=f"bmq-storage-{kind}-"))
        results.append(bench_storage(kind, base, args))
        print(describe(results[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
