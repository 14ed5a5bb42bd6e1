"""The brokers bench.kafka_compare puts side by side, each one process on 127.0.0.1 with its data
in a directory of its own: ``bmq serve`` with its default settings, and a single-node KRaft
Apache Kafka 4.4 (broker and controller in one JVM, ``kafka.Kafka``) from the jars
``scripts/kafka.sh`` resolves, with Kafka's default settings but for those a single node needs
and the ``extra`` a comparison asks for (bench.kafka_compare states them)."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from bench.server import _proc_stats, free_port, process_tree, tree_cpu_seconds
from bench.topic import BenchError

ROOT = Path(__file__).resolve().parents[1]
KAFKA_SCRIPT = ROOT / "scripts" / "kafka.sh"
# kafka-server-start.sh's heap and kafka-run-class.sh's JVM options.
KAFKA_JVM = ["-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
             "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
             "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
             # Kafka's config/log4j2.yaml logs INFO (to files): so does slf4j-simple, here to
             # the log file stderr goes to.
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
             "-Dorg.slf4j.simpleLogger.showDateTime=true"]
# What a single node needs (Kafka's defaults assume three): replication factor 1 for the
# internal topics.
SINGLE_NODE = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}


class Peer:
    """One broker process: started, stopped (SIGTERM) or killed (SIGKILL), restarted on the
    same data and port; its CPU time and memory read from /proc."""

    name = ""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.base.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.log_path = self.base / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def launch(self) -> float:
        """Starts the process; returns the time.monotonic() just before."""
        started = time.monotonic()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        return started

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 120.0) -> float:
        """Sends ``sig`` and waits for the exit; returns the seconds that took."""
        if self.proc is None or self.proc.poll() is not None:
            return 0.0
        started = time.monotonic()
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
            raise BenchError(f"{self.name} did not exit within {timeout:.0f} s of signal "
                             f"{sig}:\n{self.log_tail()}") from None
        return time.monotonic() - started

    def alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            code = None if self.proc is None else self.proc.returncode
            raise BenchError(f"{self.name} is not running (exit code {code}):\n"
                             f"{self.log_tail()}")

    def cpu_seconds(self) -> float:
        self.alive()
        assert self.proc is not None
        seconds = tree_cpu_seconds(self.proc.pid)
        if seconds is None:
            raise BenchError("/proc is unreadable: CPU time is measured from it")
        return seconds

    def memory_mb(self) -> tuple[float, float]:
        """(resident now, peak resident) of the process tree, MiB (VmRSS, VmHWM added up)."""
        self.alive()
        assert self.proc is not None
        now = peak = 0
        for pid in process_tree(self.proc.pid, _proc_stats()):
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            now += int(fields.get("VmRSS", "0 kB").split()[0])
            peak += int(fields.get("VmHWM", "0 kB").split()[0])
        return now / 1024, peak / 1024

    def data_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.base.rglob("*") if f.is_file()
                   and f != self.log_path)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


class BmqPeer(Peer):
    name = "BMQ"

    def command(self) -> list[str]:
        beside = Path(sys.executable).with_name("bmq")
        bmq = [str(beside)] if beside.exists() else [sys.executable, "-m", "bmq"]
        return [*bmq, "serve", "--data-dir", str(self.base / "data"),
                "--listen", self.bootstrap]


def kafka_classpath() -> str:
    """Kafka's jars (resolved with Maven on the first call, cached in ~/.m2)."""
    return subprocess.run([str(KAFKA_SCRIPT), "classpath"], check=True, text=True,
                          stdout=subprocess.PIPE).stdout.strip()


def random_cluster_id() -> str:
    """A Kafka Uuid as its tools print it (URL-safe base64 of 16 bytes), never starting with
    "-", which a command line would take for an option (Kafka's Uuid.randomUuid draws again)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class KafkaPeer(Peer):
    """Apache Kafka 4.4 in KRaft combined mode, its log directory formatted at construction
    (``kafka-storage format``, not counted in any start time)."""

    def __init__(self, base: Path, name: str, extra: dict[str, str]) -> None:
        super().__init__(base)
        self.name = name
        self.classpath = kafka_classpath()
        controller_port = free_port()
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
                         f"CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.base / "data"),
            **SINGLE_NODE,
            **extra,
        }
        self.config_path = self.base / "server.properties"
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        cluster_id = random_cluster_id()
        formatted = subprocess.run(
            ["java", "-cp", self.classpath, "kafka.tools.StorageTool", "format",
             "--cluster-id", cluster_id, "--config", str(self.config_path)],
            capture_output=True, text=True, check=False)
        if formatted.returncode != 0:
            raise BenchError(f"kafka-storage format failed: {formatted.stdout}"
                             f"{formatted.stderr}")

    def command(self) -> list[str]:
        return ["java", *KAFKA_JVM, f"-Dkafka.logs.dir={self.base}", "-cp", self.classpath,
                "kafka.Kafka", str(self.config_path)]


def environment_note(data_root: Path) -> str:
    """The machine and the data disk, for the report."""
    mount = subprocess.run(["df", "--output=source,fstype", str(data_root)], capture_output=True,
                           text=True, check=False).stdout.splitlines()[-1:]
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    first = (java.stderr or java.stdout).splitlines()[:1]
    return (f"{os.cpu_count()} CPUs; {first[0] if first else 'java ?'}; data disk "
            f"{' '.join(mount[0].split()) if mount else '?'}")
