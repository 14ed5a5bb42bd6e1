"""`bmq local`: a whole cluster (ZooKeeper, a controller, brokers, a proxy) on this machine in
one command, used by a real client, stopped by Ctrl-C with nothing left running; a port in use
stops it before it starts anything."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer

from tests.conftest import BrokerProcess, bmq_command, free_port


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _first_of_three_ports() -> int:
    """The first of three consecutive free ports: two brokers and the proxy."""
    port = free_port()
    while _accepts(port + 1) or _accepts(port + 2):
        port = free_port()
    return port


def _start_local(directory: Path, port: int, zookeeper_port: int
                 ) -> tuple[subprocess.Popen[str], list[str]]:
    proc = subprocess.Popen(
        [*bmq_command(), "local", "--dir", str(directory), "--brokers", "2", "--proxy",
         "--port", str(port), "--zookeeper-port", str(zookeeper_port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        assert line, f"bmq local ended before it was ready:\n{''.join(lines)}"
        lines.append(line)
        if line.startswith("ready"):
            return proc, lines
    proc.kill()
    raise AssertionError(f"bmq local not ready in 120 s:\n{''.join(lines)}")


def test_a_local_cluster_serves_clients_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    port, zookeeper_port = _first_of_three_ports(), free_port()
    proc, lines = _start_local(tmp_path / "local", port, zookeeper_port)
    try:
        brokers = f"127.0.0.1:{port},127.0.0.1:{port + 1}"
        assert f"bootstrap.servers={brokers}\n" in lines, lines
        assert f"through the proxy: bootstrap.servers=127.0.0.1:{port + 2}\n" in lines, lines
        topic = f"local-{uuid.uuid4().hex[:8]}"
        producer = Producer({"bootstrap.servers": brokers, "acks": "all",
                             "enable.idempotence": True})
        for i in range(100):
            producer.produce(topic, value=f"v{i}".encode())
        assert producer.flush(60) == 0
        consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port + 2}",
                             "group.id": topic, "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        seen: set[bytes] = set()
        deadline = time.monotonic() + 60
        while len(seen) < 100 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.add(message.value())
        consumer.close()
        assert seen == {f"v{i}".encode() for i in range(100)}
        # Without --bootstrap, cluster info asks the brokers ZooKeeper knows (not localhost).
        env = {k: v for k, v in os.environ.items() if k != "BMQ_BOOTSTRAP"}
        info = subprocess.run([*bmq_command(), "cluster", "info", "--zookeeper",
                               f"127.0.0.1:{zookeeper_port}", "-o", "json"], env=env,
                              capture_output=True, text=True, timeout=60, check=True)
        doc = json.loads(info.stdout)
        assert sorted(b["port"] for b in doc["brokers"]) == [port, port + 1], doc
        assert doc["cluster_id"] == doc["zookeeper"]["cluster_id"]
        assert [p["port"] for p in doc["proxies"]] == [port + 2]
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 0, out
    assert "stopped" in out
    for stopped in (port, port + 1, port + 2, zookeeper_port):
        assert not _accepts(stopped), f"port {stopped} still served after bmq local stopped"
    # One INFO line per concern, not one per partition moved (there were 100 for the 50
    # __consumer_offsets partitions taken at the start and released at the stop).
    info = [line for line in (tmp_path / "local" / "logs" / "broker1.log").read_text()
            .splitlines() if " INFO " in line]
    assert any("took " in line and " partition(s): " in line for line in info), info
    assert not [line for line in info if "with leader epoch" in line], info
    assert len(info) <= 25, "\n".join(info)


def test_a_port_in_use_stops_it_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([*bmq_command(), "local", "--dir", str(tmp_path / "local"),
                                 "--port", str(port), "--zookeeper-port", str(free_port())],
                                capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 3, result.stderr
    assert f"port {port} of 127.0.0.1 is in use" in result.stderr
    assert not (tmp_path / "local").exists()


def test_cluster_info_refuses_brokers_of_another_cluster(tmp_path: Path,
                                                          broker: BrokerProcess) -> None:
    port, zookeeper_port = _first_of_three_ports(), free_port()
    proc, _ = _start_local(tmp_path / "local", port, zookeeper_port)
    try:
        mixed = subprocess.run([*bmq_command(), "cluster", "info", "--zookeeper",
                                f"127.0.0.1:{zookeeper_port}", "-b", broker.bootstrap],
                               capture_output=True, text=True, timeout=60, check=False)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=90)
    assert mixed.returncode == 1, mixed
    assert f"the brokers at {broker.bootstrap} are cluster" in mixed.stderr, mixed.stderr
