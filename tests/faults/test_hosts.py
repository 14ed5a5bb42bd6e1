"""The fault harness's own tests: each fault does what it says on real namespaces and packets,
and leaves nothing behind."""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import make_topic_name
from tests.faults.clock import Clock, shim
from tests.faults.cluster import (
    BMQ_HOSTS,
    BROKERS,
    CONTROLLERS,
    KAFKA_PORT,
    PROXY,
    S3,
    SESSION_TIMEOUT_MS,
    ZOOKEEPERS,
    FaultCluster,
    accepts,
)
from tests.faults.conftest import NetworkFactory
from tests.faults.history import History
from tests.faults.hosts import Host, Network, ip, leftovers, remove_stale
from tests.faults.nemesis import CLIENTS, Nemesis, Schedule, ScheduleRunner

TCP_PORT = 7000    # and UDP on 7001: the echo server's ports
CLOCK_READ_S = 0.5    # a step is seen at once (the shim maps the offset file); printing lags
# Echoes TCP on 7000 and UDP on 7001; prints one line per datagram received.
_ECHO = """
import socket, sys, threading
tcp = socket.socket(); tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
tcp.bind(("0.0.0.0", 7000)); tcp.listen(64)
def serve(conn):
    with conn:
        while data := conn.recv(4096):
            conn.sendall(data)
def accept():
    while True:
        threading.Thread(target=serve, args=(tcp.accept()[0],), daemon=True).start()
threading.Thread(target=accept, daemon=True).start()
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(("0.0.0.0", 7001))
print("ready", flush=True)
while True:
    data, peer = udp.recvfrom(100)
    print("got", data.decode(), flush=True)
    try:
        udp.sendto(data, peer)
    except OSError:     # EPERM: a fault's firewall drops it
        pass
"""
# Sends N datagrams to HOST's UDP echo and prints how many came back.
_UDP_PROBE = """
import socket, sys, threading, time
host, count = sys.argv[1], int(sys.argv[2])
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.settimeout(1.0)
back = 0
def receive():    # while sending: a full receive buffer would drop echoes too
    global back
    try:
        while True:
            sock.recv(100); back += 1
    except OSError:
        pass
receiver = threading.Thread(target=receive)
receiver.start()
for i in range(count):
    try:
        sock.sendto(str(i).encode(), (host, 7001))
    except OSError:     # EPERM: a fault's firewall drops it
        pass
    time.sleep(0.0005)
receiver.join()
print(back)
"""


def echo(host: Host) -> subprocess.Popen[bytes]:
    server = host.popen([sys.executable, "-c", _ECHO], stdout=subprocess.PIPE)
    assert server.stdout is not None and server.stdout.readline() == b"ready\n"
    return server


def connects(source: Host | None, target: Host) -> bool:
    """Whether a TCP connection from ``source`` (None: the test process) is answered."""
    cmd = ["timeout", "1", "bash", "-c", f"exec 3<>/dev/tcp/{target.address}/{TCP_PORT}"]
    if source is None:
        return subprocess.run(cmd, capture_output=True).returncode == 0
    return source.run(cmd, check=False).returncode == 0


def udp_echoes(source: Host, target: Host, count: int) -> int:
    return int(source.run([sys.executable, "-c", _UDP_PROBE, target.address, str(count)])
               .stdout)


def datagrams_received(server: subprocess.Popen[bytes]) -> int:
    """How many datagrams the echo server received since last asked (it prints a line for
    each as it receives it: read until a quiet second)."""
    assert server.stdout is not None
    os.set_blocking(server.stdout.fileno(), False)
    received, quiet_since = 0, time.monotonic()
    while time.monotonic() - quiet_since < 1.0:
        line = server.stdout.readline()
        if line:
            received += 1
            quiet_since = time.monotonic()
        else:
            time.sleep(0.01)
    return received


Echoes = dict[str, subprocess.Popen[bytes]]


@pytest.fixture
def three(network_factory: NetworkFactory) -> Iterator[tuple[Network, Echoes]]:
    network = network_factory(["a", "b", "c"])
    servers = {host.name: echo(host) for host in network}
    yield network, servers
    for server in servers.values():
        server.kill()


def test_partition_cuts_a_pair_both_ways_and_only_it(three: tuple[Network, Echoes]) -> None:
    network = three[0]
    a, b, c = network["a"], network["b"], network["c"]
    nemesis = Nemesis(network)
    pairs = [(x, y) for x in (a, b, c) for y in (a, b, c) if x is not y]
    assert all(connects(x, y) for x, y in pairs)
    with nemesis.partition("a", "b"):
        assert not connects(a, b) and not connects(b, a)
        assert all(connects(x, y) for x, y in pairs if {x.name, y.name} != {"a", "b"})
        assert connects(None, a) and connects(None, b)
    assert all(connects(x, y) for x, y in pairs)
    with nemesis.partition("a", CLIENTS):
        assert not connects(None, a) and connects(a, b) and connects(None, b)
    assert a.run(["nft", "list", "tables"]).stdout == ""
    starts = [op.value for op in nemesis.history if op.f == "start"]
    assert [value["peers"] for value in starts] == [("b",), (CLIENTS,)]


def test_one_way_loss_lets_requests_in_but_not_answers(three: tuple[Network, Echoes]) -> None:
    network, servers = three
    a, b, c = network["a"], network["b"], network["c"]
    with Nemesis(network).one_way_loss("b", ["a"]):
        assert udp_echoes(a, b, 20) == 0
        assert datagrams_received(servers["b"]) == 20
        assert udp_echoes(c, b, 20) == 20
        assert not connects(a, b) and connects(c, b)
    assert udp_echoes(a, b, 20) == 20


def test_30_percent_loss_drops_about_30_percent_each_way(
        network_factory: NetworkFactory) -> None:
    network = network_factory(["a", "b"])
    server = echo(network["b"])
    sent = 1000
    try:
        with Nemesis(network).loss("b", 30):
            echoed = udp_echoes(network["a"], network["b"], sent)
            received = datagrams_received(server)
    finally:
        server.kill()
    inbound_loss = 1 - received / sent
    outbound_loss = 1 - echoed / received
    assert 0.22 < inbound_loss < 0.38, (received, echoed)
    assert 0.22 < outbound_loss < 0.38, (received, echoed)


def round_trip_ms(sock: socket.socket) -> float:
    start = time.monotonic()
    sock.sendall(b"x")
    assert sock.recv(10) == b"x"
    return (time.monotonic() - start) * 1000


def test_latency_adds_500_ms_to_a_round_trip(three: tuple[Network, Echoes]) -> None:
    network = three[0]
    nemesis = Nemesis(network)
    to_b = socket.create_connection((network["b"].address, TCP_PORT), timeout=5)
    to_c = socket.create_connection((network["c"].address, TCP_PORT), timeout=5)
    assert max(round_trip_ms(to_b) for _ in range(3)) < 100
    with nemesis.latency("b", 500, jitter_ms=100):
        late = [round_trip_ms(to_b) for _ in range(5)]     # a connection older than the fault
        fresh = socket.create_connection((network["b"].address, TCP_PORT), timeout=5)
        late += [round_trip_ms(fresh) for _ in range(3)]
        assert max(round_trip_ms(to_c) for _ in range(3)) < 100
    assert all(390 < ms < 700 for ms in late), late
    assert 430 < statistics.median(late) < 620, late
    assert statistics.pstdev(late) > 5, late    # jitter
    assert max(round_trip_ms(to_b) for _ in range(3)) < 100
    assert "slow" not in network["b"].run(["ip", "-o", "link"]).stdout
    assert network["b"].run(["ip", "rule"]).stdout.count("lookup") == 3    # local, main, default


class _ClockOnly:
    """The processes of a host, as far as a clock jump needs: their clock."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    def clock(self, host: str) -> Clock:
        return self._clock


def test_clock_jump_is_seen_by_a_process_under_the_clock(
        network_factory: NetworkFactory, tmp_path: Path) -> None:
    network = network_factory(["a"])
    clock = Clock(tmp_path)
    printer = network["a"].popen(
        [sys.executable, "-c", "import time\nwhile True:\n print(time.time(), flush=True)\n"
                               " time.sleep(0.1)"],
        env={**os.environ, **clock.env()}, stdout=subprocess.PIPE)
    printed = printer.stdout
    assert printed is not None

    def offset() -> float:
        os.set_blocking(printed.fileno(), False)
        while printed.readline():     # drop what was printed before
            pass
        os.set_blocking(printed.fileno(), True)
        return float(printed.readline()) - time.time()

    def offset_becomes(expected: float) -> float:
        """The process's offset once it is ``expected`` (+- 2 s), or ``CLOCK_READ_S`` on."""
        deadline = time.monotonic() + CLOCK_READ_S
        while abs((seen := offset()) - expected) > 2 and time.monotonic() < deadline:
            pass
        return seen

    try:
        nemesis = Nemesis(network, _ClockOnly(clock))  # type: ignore[arg-type]
        assert abs(offset()) < 1
        with nemesis.clock_jump("a", 300):
            assert 298 < offset_becomes(300) < 302
            with nemesis.clock_jump("a", -420):
                assert -122 < offset_becomes(-120) < -118
        assert abs(offset_becomes(0)) < 2
    finally:
        printer.kill()


def test_teardown_leaves_nothing_and_stale_runs_are_removed(tmp_path: Path) -> None:
    network = Network(["a", "b"])
    tag = network.tag
    with Nemesis(network).partition("a", "b"):
        assert len(leftovers(tag)) == 5     # 2 namespaces, 2 veths, the bridge
    sleeper = network["a"].popen(["sleep", "60"])
    while str(sleeper.pid) not in ip("netns", "pids", network["a"].netns).split():
        time.sleep(0.01)    # until `ip netns exec` has entered the namespace
    network.close()
    assert leftovers(tag) == []
    assert sleeper.wait(5) == -9

    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"{dead.pid:06x}00"
    subprocess.run(["ip", "netns", "add", f"bmq{stale}-x"], check=True)
    subprocess.run(["ip", "link", "add", f"bq{stale}br", "type", "bridge"], check=True)
    assert sorted(remove_stale()) == sorted([f"bmq{stale}-x", f"bq{stale}br"])
    assert leftovers(stale) == []


def test_schedule_is_seeded_bounded_and_combined() -> None:
    hosts = ["broker1", "broker2", "broker3", "zk1"]
    kinds = ["partition", "loss", "latency", "kill", "pause"]
    schedule = Schedule.random(7, 120, kinds, hosts)
    assert schedule == Schedule.random(7, 120, kinds, hosts)
    assert schedule != Schedule.random(8, 120, kinds, hosts)
    assert all(step.at_s + step.duration_s <= 120 for step in schedule.steps)
    assert {step.kind for step in schedule.steps} == set(kinds)
    network_steps = [s for s in schedule.steps if s.kind not in ("kill", "pause")]
    combined = [s for s in schedule.steps if s.kind in ("kill", "pause") and any(
        n.at_s <= s.at_s and s.at_s + s.duration_s <= n.at_s + n.duration_s + 1e-6
        and n.hosts == s.hosts for n in network_steps)]
    assert combined

    clocked = Schedule.random(7, 120, ["partition", "clock_jump"], hosts,
                              targets={"clock_jump": ["broker1"]})
    assert {s.hosts for s in clocked.steps if s.kind == "clock_jump"} == {("broker1",)}
    assert {s.hosts for s in clocked.steps if s.kind == "partition"} != {("broker1",)}


def _produce(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5, "message.timeout.ms": 30000})
    errors: list[object] = []
    for value in values:
        producer.produce(topic, value.encode(), key=value.encode(),
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert producer.flush(60) == 0 and errors == []


def _consume(bootstrap: str, topic: str, expected: int) -> set[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: set[str] = set()
    deadline = time.monotonic() + 60
    try:
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.add(bytes(message.value() or b"").decode())
    finally:
        consumer.close()
    return values


@pytest.mark.slow
def test_fault_cluster_serves_clients_and_a_killed_broker_loses_its_partitions(
        fault_cluster: FaultCluster) -> None:
    cluster = fault_cluster
    endpoints = cluster.endpoints()
    assert endpoints.proxy is not None
    for name in BMQ_HOSTS:     # under the clock a nemesis jumps
        pid = cluster.processes[name].proc.pid  # type: ignore[union-attr]
        assert str(shim()) in Path(f"/proc/{pid}/maps").read_text()
    topic = make_topic_name("smoke")
    admin = AdminClient({"bootstrap.servers": endpoints.admin})
    admin.create_topics([NewTopic(topic, 6)])[topic].result(30)
    cluster.wait_writable(topic)
    _produce(endpoints.proxy, topic, [f"proxy-{i}" for i in range(100)])
    _produce(endpoints.bootstrap, topic, [f"brokers-{i}" for i in range(100)])
    assert len(_consume(endpoints.bootstrap, topic, 200)) == 200

    owners = cluster.owners(topic)
    victim = f"broker{owners[0]}"
    others = {cluster.broker_id(b) for b in BROKERS} - {owners[0]}
    nemesis = cluster.nemesis()
    with nemesis.kill(victim):
        moved_s = cluster.wait_writable(topic, others, timeout=SESSION_TIMEOUT_MS / 1000 + 10)
        _produce(endpoints.proxy, topic, [f"after-kill-{i}" for i in range(50)])
    cluster.heal()
    assert len(_consume(endpoints.bootstrap, topic, 250)) == 250
    assert cluster.unexpected_exits() == {}
    start, stop = [op for op in nemesis.history if op.process == "nemesis"]
    assert start.f == "start" and stop.f == "stop" and start.value["kind"] == "kill"
    print(f"cluster started in {cluster.start_seconds:.1f} s; {victim}'s partitions writable "
          f"elsewhere {moved_s:.2f} s after kill -9; kill applied in "
          f"{(start.completed_ns or 0) - start.invoked_ns} ns, undone (restart) in "
          f"{(stop.completed_ns or 0) - stop.invoked_ns} ns")


def test_schedule_runner_applies_each_fault_in_its_window_and_heals(
        three: tuple[Network, Echoes]) -> None:
    network = three[0]
    history = History()
    schedule = Schedule.random(3, 4.0, ["partition", "loss", "one_way_loss"], ["a", "b", "c"],
                               fault_s=(0.4, 0.8), gap_s=(0.1, 0.3))
    runner = ScheduleRunner(Nemesis(network, history=history), schedule).start()
    runner.join(15)
    assert runner.done() and runner.errors == []
    ops = [op for op in history if op.process == "nemesis"]
    assert [op.f for op in ops] == ["start", "stop"] * len(schedule.steps)
    for step, start, stop in zip(schedule.steps, ops[::2], ops[1::2], strict=True):
        assert (start.value["kind"], tuple(start.value["hosts"])) == (step.kind, step.hosts)
        assert start.type == stop.type == "ok"
        lasted_s = (stop.invoked_ns - start.invoked_ns) / 1e9
        assert step.duration_s - 0.1 < lasted_s < step.duration_s + 0.5, (step, lasted_s)
    assert all(host.run(["nft", "list", "tables"]).stdout == "" for host in network)

    # Stopped early, it still undoes what is active.
    schedule = Schedule.random(4, 60.0, ["partition"], ["a", "b", "c"], fault_s=(50, 55),
                               gap_s=(0.1, 0.2))
    runner = ScheduleRunner(Nemesis(network, history=history), schedule).start()
    time.sleep(0.5)
    assert any(host.run(["nft", "list", "tables"]).stdout for host in network)
    runner.stop()
    assert all(host.run(["nft", "list", "tables"]).stdout == "" for host in network)


def _log_append_time(bootstrap: str, topic: str) -> float:
    """The broker's timestamp of one record produced now (seconds)."""
    stamps: list[int] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, b"x", on_delivery=lambda err, msg: stamps.append(
        msg.timestamp()[1] if err is None and msg.timestamp()[0] == TIMESTAMP_LOG_APPEND_TIME
        else -1))
    assert producer.flush(30) == 0 and len(stamps) == 1 and stamps[0] > 0, stamps
    return stamps[0] / 1000


def _state(cluster: FaultCluster, host: str) -> str:
    """The process's state letter in /proc (T: stopped)."""
    pid = cluster.processes[host].proc.pid  # type: ignore[union-attr]
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


@pytest.mark.slow
def test_cluster_faults_cut_what_they_name(fault_cluster: FaultCluster) -> None:
    cluster = fault_cluster
    topic = make_topic_name("cut")
    admin = AdminClient({"bootstrap.servers": cluster.endpoints().admin})
    admin.create_topics([NewTopic(topic, 6)])[topic].result(30)
    cluster.wait_writable(topic)
    nemesis = cluster.nemesis()
    owned = {b: [p for p, o in cluster.owners(topic).items() if o == cluster.broker_id(b)]
             for b in BROKERS}
    victim = next(b for b in BROKERS if owned[b])
    broker, s3 = cluster.hosts[victim], cluster.hosts[S3]
    others = {cluster.broker_id(b) for b in BROKERS if b != victim}

    # A broker cut off from ZooKeeper and the controllers: clients still reach it, its
    # partitions move once its session expires.
    with nemesis.partition(victim, [*ZOOKEEPERS, *CONTROLLERS]):
        assert accepts(broker.address, KAFKA_PORT)
        moved_s = cluster.wait_writable(topic, others, timeout=SESSION_TIMEOUT_MS / 1000 + 15)
    # ... from the storage only.
    s3_port = cluster.storage_options["endpoint_url"].rpartition(":")[2]
    reach_s3 = ["timeout", "3", "bash", "-c", f"exec 3<>/dev/tcp/{s3.address}/{s3_port}"]
    with nemesis.partition(victim, S3):
        assert broker.run(reach_s3, check=False).returncode != 0
        assert cluster.hosts[next(b for b in BROKERS if b != victim)].run(reach_s3)
        assert accepts(broker.address, KAFKA_PORT)
    assert broker.run(reach_s3).returncode == 0
    # ZooKeeper's leader cut off from the other servers: they elect another.
    leader = cluster.zookeeper_leader()
    assert leader is not None
    with nemesis.partition(leader, [zk for zk in ZOOKEEPERS if zk != leader]):
        cluster.wait_for(lambda: cluster.zookeeper_leader() not in (None, leader),
                      "another ZooKeeper leader", 30)
    # SIGSTOP and SIGCONT.
    with nemesis.pause(victim):     # the signal is delivered asynchronously
        cluster.wait_for(lambda: _state(cluster, victim) == "T", f"{victim} stopped", 5)
    cluster.wait_for(lambda: _state(cluster, victim) != "T", f"{victim} running", 5)
    # A clock jump is seen by the broker: it stamps LogAppendTime with its own clock.
    stamped = make_topic_name("clock")
    admin.create_topics([NewTopic(stamped, 1, config={
        "message.timestamp.type": "LogAppendTime"})])[stamped].result(30)
    cluster.wait_writable(stamped)
    owner = f"broker{cluster.owners(stamped)[0]}"
    with nemesis.clock_jump(owner, 300):
        time.sleep(CLOCK_READ_S)
        offset_s = _log_append_time(cluster.endpoints().bootstrap, stamped) - time.time()
    assert 295 < offset_s < 305, offset_s
    cluster.heal()
    assert cluster.unexpected_exits() == {}
    # An exit nobody caused is told, also after heal() started the process again.
    cluster.processes[PROXY].signal(signal.SIGTERM)
    cluster.processes[PROXY].proc.wait(30)  # type: ignore[union-attr]
    cluster.heal()
    assert cluster.unexpected_exits() == {PROXY: [0]}
    print(f"{victim}'s partitions moved {moved_s:.1f} s after it was cut off from ZooKeeper "
          f"and the controllers")
