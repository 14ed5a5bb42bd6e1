"""Which Python client BMQ talks to HDFS with, by measurement on a real HDFS (issue #31).

    python -m bench.hdfs_clients [--namenode hdfs://HOST:PORT --http HOST:PORT]
                                 [--appends 300] [--append-bytes 1024] [--sequential-mib 64]

Without ``--namenode`` it starts a MiniDFSCluster (``tests/hdfs.py``: a NameNode and 3 DataNodes,
replication 3) and stops it after. For each candidate it measures

* small appends that must be durable before the next: ``--appends`` writes of
  ``--append-bytes`` to one open file, each followed by the client's strongest durability call
  (p50/p99 latency);
* sequential write and read MB/s: ``--sequential-mib`` in 1 MiB calls to a new file, then read
  back in 1 MiB calls;

and checks (by doing it, not from documentation) what BMQ's storage needs: appending to an
existing file, a durability call on a file kept open, rename over an existing file, listing,
lease recovery, and that a second writer is refused while the first holds the file.

Candidates: hdfs-native (Rust HDFS RPC client), pyarrow's HadoopFileSystem (JNI libhdfs) and
WebHDFS through fsspec (HTTP via the NameNode's web server). A candidate that cannot run here says
why in its row. Figures depend on the machine's load: the table gives the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MIB = 1 << 20
ROOT = "/bench-hdfs-clients"


@dataclass
class ClientResult:
    client: str
    error: str = ""
    durability_call: str = ""
    append_p50_ms: float = 0.0
    append_p99_ms: float = 0.0
    write_mb_s: float = 0.0
    read_mb_s: float = 0.0
    supports: dict[str, str] = field(default_factory=dict)


def _read_mb_s(open_reader: Callable[[], Any]) -> float:
    """MB/s of reading a whole file, MiB by MiB, from the reader ``open_reader`` opens."""
    start = time.perf_counter()
    total = 0
    with open_reader() as reader:
        while chunk := reader.read(MIB):
            total += len(chunk)
    return total / 1e6 / (time.perf_counter() - start)

def _percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


# Hadoop's metrics reach JMX through a cache refreshed every 10 s (the metrics period).
JMX_CACHE_S = 11.0


def datanode_fsyncs(jmx_address: str | None) -> dict[str, int]:
    """Each DataNode's FsyncCount (its block files fsynced on a client's hsync), from the JMX
    servlet of one DataNode's web server: a MiniDFSCluster's DataNodes share one JVM and so one
    metrics system, and each lists all of them. Waits out the JMX cache first."""
    if not jmx_address:
        return {}
    time.sleep(JMX_CACHE_S)
    query = "Hadoop:service=DataNode,name=DataNodeActivity-*"
    with urllib.request.urlopen(f"http://{jmx_address}/jmx?qry={query}", timeout=30) as answer:
        beans = json.load(answer)["beans"]
    return {bean["name"].rsplit("-", 2)[-2] + ":" + bean["name"].rsplit("-", 1)[-1]:
            int(bean["FsyncCount"]) for bean in beans}


def _check(supports: dict[str, str], what: str, action: Callable[[], str]) -> None:
    """Run ``action`` and record what it says, or the error it raised."""
    try:
        supports[what] = action()
    except Exception as error:  # (a capability check records any failure)
        supports[what] = f"no: {type(error).__name__}: {str(error).splitlines()[0][:120]}"


# ------------------------------------------------------------------------------- hdfs-native
def bench_hdfs_native(namenode: str, jmx_address: str | None,
                      args: argparse.Namespace) -> ClientResult:
    from hdfs_native import Client, WriteOptions

    result = ClientResult("hdfs-native", durability_call="hsync")
    client = Client(namenode)
    client.mkdirs(ROOT, create_parent=True)
    path = f"{ROOT}/native-appends"
    payload = os.urandom(args.append_bytes)
    writer = client.create(path, WriteOptions(overwrite=True))
    latencies = []
    fsyncs_before = datanode_fsyncs(jmx_address)
    for _ in range(args.appends):
        start = time.perf_counter()
        writer.write(payload)
        writer.hsync()
        latencies.append(time.perf_counter() - start)
    fsyncs_after = datanode_fsyncs(jmx_address)
    visible = client.get_file_info(path).length
    writer.close()
    result.append_p50_ms = 1000 * statistics.median(latencies)
    result.append_p99_ms = 1000 * _percentile(latencies, 0.99)
    result.supports["length visible after hsync"] = (
        "yes" if visible == args.appends * args.append_bytes else
        f"no: NameNode says {visible} of {args.appends * args.append_bytes}")
    if fsyncs_after:
        counts = [fsyncs_after[n] - fsyncs_before.get(n, 0) for n in sorted(fsyncs_after)]
        result.supports[f"DataNodes' fsyncs for {args.appends} hsyncs"] = (
            f"{counts} (each DataNode's FsyncCount: hsync reaches the disks of the pipeline)")

    block = os.urandom(MIB)
    path = f"{ROOT}/native-sequential"
    start = time.perf_counter()
    with client.create(path, WriteOptions(overwrite=True)) as out:
        for _ in range(args.sequential_mib):
            out.write(block)
    result.write_mb_s = args.sequential_mib * MIB / 1e6 / (time.perf_counter() - start)
    result.read_mb_s = _read_mb_s(lambda: client.read(path))

    supports = result.supports

    def append_existing() -> str:
        with client.append(f"{ROOT}/native-appends") as out:
            out.write(b"x")
            out.hsync()
        return "yes"

    def rename_over() -> str:
        with client.create(f"{ROOT}/native-tmp", WriteOptions(overwrite=True)) as out:
            out.write(b"new")
        client.rename(f"{ROOT}/native-tmp", f"{ROOT}/native-sequential", overwrite=True)
        with client.read(f"{ROOT}/native-sequential") as reader:
            return "yes (rename2 OVERWRITE)" if reader.read() == b"new" else "no: old content"

    def listing() -> str:
        names = sorted(s.path.rsplit("/", 1)[-1] for s in client.list_status(ROOT))
        return "yes" if "native-appends" in names else f"no: {names}"

    def exclusive_and_recovery() -> str:
        held = f"{ROOT}/native-held"
        first = client.create(held, WriteOptions(overwrite=True))
        first.write(b"first")
        first.hsync()
        second = Client(namenode)
        try:
            second.append(held).close()
            return "no: a second writer appended while the first held the lease"
        except Exception as refused:  # (the NameNode's refusal is the point)
            refusal = type(refused).__name__
        deadline = time.monotonic() + 60
        while not second.recover_lease(held):
            if time.monotonic() > deadline:
                return f"second writer refused ({refusal}); recover_lease did not finish"
            time.sleep(0.5)
        try:
            first.write(b"late")
            first.hsync()
            first.close()
            fenced = "no: the old writer still appended after recovery"
        except Exception:  # (the old writer must fail)
            fenced = "old writer fenced"
        return f"yes: second writer refused ({refusal}); recover_lease closed it; {fenced}"

    def open_block_readable() -> str:
        path = f"{ROOT}/native-open"
        with client.create(path, WriteOptions(overwrite=True)) as out:
            out.write(b"x" * 1000)
            out.hsync()
            with Client(namenode).read(path) as reader:
                seen = len(reader)
        return "yes" if seen == 1000 else (
            f"no: a reader's length is {seen} of 1000 hsynced bytes (the open block is left "
            "out; BMQ serves it from the writer's memory)")

    _check(supports, "reader sees the open block's hsynced bytes", open_block_readable)
    _check(supports, "append to existing file", append_existing)
    supports["durability on open file"] = "hsync (no separate hflush call)"
    _check(supports, "rename over existing", rename_over)
    _check(supports, "listing", listing)
    _check(supports, "exclusive writer + lease recovery", exclusive_and_recovery)
    client.delete(ROOT, recursive=True)
    return result


# ------------------------------------------------------------------------------------ pyarrow
def bench_pyarrow(namenode: str, args: argparse.Namespace) -> ClientResult:
    import pyarrow.fs

    result = ClientResult("pyarrow HadoopFileSystem (libhdfs)", durability_call="flush (hflush)")
    try:
        pyarrow.fs.HadoopFileSystem.from_uri(namenode)
    except OSError as error:
        result.error = " ".join(str(error).split())
        return result
    result.error = "connected, but this bench does not measure it further"
    return result


# ------------------------------------------------------------------------------------ WebHDFS
def webhdfs_append(fs: Any, path: str, data: bytes) -> None:
    """One WebHDFS APPEND: the NameNode redirects to a DataNode, which takes the bytes and
    closes the file (all DataNodes of the pipeline have acknowledged them)."""
    redirect = fs._call("APPEND", "POST", path, redirect=False)
    answer = fs.session.post(redirect.headers["Location"], data=data,
                             headers={"content-type": "application/octet-stream"})
    answer.raise_for_status()


def bench_webhdfs(http_address: str, args: argparse.Namespace) -> ClientResult:
    import fsspec

    result = ClientResult("WebHDFS (fsspec)",
                          durability_call="one APPEND request a write (opened, written, closed)")
    host, port = http_address.rsplit(":", 1)
    fs = fsspec.filesystem("webhdfs", host=host, port=int(port), user=os.environ.get(
        "USER", "root"), skip_instance_cache=True)
    fs.makedirs(ROOT, exist_ok=True)
    path = f"{ROOT}/web-appends"
    payload = os.urandom(args.append_bytes)
    fs.pipe_file(path, b"")
    latencies = []
    for _ in range(args.appends):
        start = time.perf_counter()
        webhdfs_append(fs, path, payload)
        latencies.append(time.perf_counter() - start)
    result.append_p50_ms = 1000 * statistics.median(latencies)
    result.append_p99_ms = 1000 * _percentile(latencies, 0.99)

    block = os.urandom(MIB)
    path = f"{ROOT}/web-sequential"
    start = time.perf_counter()
    with fs.open(path, "wb", block_size=8 * MIB) as out:
        for _ in range(args.sequential_mib):
            out.write(block)
    result.write_mb_s = args.sequential_mib * MIB / 1e6 / (time.perf_counter() - start)
    result.read_mb_s = _read_mb_s(lambda: fs.open(path, "rb", block_size=8 * MIB))

    supports = result.supports

    def append_existing() -> str:
        try:
            with fs.open(f"{ROOT}/web-appends", "ab") as out:
                out.write(b"x")
        except Exception as error:  # (recorded, then the protocol's own way)
            webhdfs_append(fs, f"{ROOT}/web-appends", b"x")
            return (f"yes by APPEND requests (fsspec's 'ab' mode fails on an existing file: "
                    f"{type(error).__name__}); each append opens and closes the file")
        return "yes (each append opens and closes the file)"

    def rename_over() -> str:
        fs.pipe_file(f"{ROOT}/web-tmp", b"new")
        fs.mv(f"{ROOT}/web-tmp", f"{ROOT}/web-sequential")
        return "yes" if fs.cat_file(f"{ROOT}/web-sequential") == b"new" else \
            "no: RENAME leaves an existing target (false); delete + rename is not atomic"

    def listing() -> str:
        names = [str(p).rsplit("/", 1)[-1] for p in fs.ls(ROOT, detail=False)]
        return "yes" if "web-appends" in names else f"no: {names}"

    _check(supports, "append to existing file", append_existing)
    supports["durability on open file"] = "no: no file stays open between requests"
    _check(supports, "rename over existing", rename_over)
    _check(supports, "listing", listing)
    supports["exclusive writer + lease recovery"] = (
        "no: the lease lasts one request; WebHDFS has no recoverLease operation")
    fs.rm(ROOT, recursive=True)
    return result


# ------------------------------------------------------------------------------------- report
def markdown(results: list[ClientResult], args: argparse.Namespace, load: float) -> str:
    lines = [
        f"HDFS clients on a MiniDFSCluster (3 DataNodes, replication 3), load average "
        f"{load:.1f} on {os.cpu_count()} cores; {args.appends} appends of {args.append_bytes} "
        f"B, {args.sequential_mib} MiB sequential",
        "",
        "| client | durable append p50 / p99 ms | write MB/s | read MB/s | durability call |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in results:
        if r.error:
            lines.append(f"| {r.client} | cannot run here: {r.error} | | | |")
        else:
            lines.append(f"| {r.client} | {r.append_p50_ms:.2f} / {r.append_p99_ms:.2f} | "
                         f"{r.write_mb_s:.0f} | {r.read_mb_s:.0f} | {r.durability_call} |")
    lines += ["", "| client | what BMQ needs | result |", "| --- | --- | --- |"]
    for r in results:
        for what, answer in r.supports.items():
            lines.append(f"| {r.client} | {what} | {answer} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namenode", help="hdfs://HOST:PORT (default: start a MiniDFSCluster)")
    parser.add_argument("--http", help="the NameNode's web address HOST:PORT (for WebHDFS)")
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--append-bytes", type=int, default=1024)
    parser.add_argument("--sequential-mib", type=int, default=64)
    parser.add_argument("--datanode-http", help="a DataNode's web address HOST:PORT (for its "
                        "fsync counter; given when this starts the cluster)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    hdfs: Any = None
    namenode, http_address, jmx_address = args.namenode, args.http, args.datanode_http
    if namenode is None:
        from tests.hdfs import MiniHdfs

        hdfs = MiniHdfs.start(Path(tempfile.mkdtemp(prefix="bench-hdfs-")))
        namenode, http_address = hdfs.namenode, hdfs.http_address
        jmx_address = hdfs.info["datanodes"][0]["http"]
    try:
        load = os.getloadavg()[0]
        results = [bench_hdfs_native(namenode, jmx_address, args), bench_pyarrow(namenode, args)]
        if http_address:
            results.append(bench_webhdfs(http_address, args))
    finally:
        if hdfs is not None:
            hdfs.stop()
    print(markdown(results, args, load))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))


if __name__ == "__main__":
    main()
