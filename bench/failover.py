"""Cluster-mode failover benchmark: kill -9, SIGSTOP, scale-out and a rolling restart under
steady idempotent acks=all production, on a throw-away ZooKeeper + controller + brokers
(file://, or SeaweedFS S3 with --s3).

    .venv/bin/python -m bench.failover [--rounds 3] [--sigstop-rounds 1] [--freeze-s 20]
                                       [--session-timeout-ms MS] [--rate 500] [--s3]
                                       [--metadata-refresh-ms MS] [--scale-outs N]
                                       [--proxy] [--client confluent|kafka-python|aiokafka]

BMQ's settings are its defaults (the session timeout too) unless given; the producer is
confluent-kafka with librdkafka's own defaults for metadata refresh and back-offs unless
``--metadata-refresh-ms`` is given (the test workload's short back-offs otherwise), or with
``--client`` kafka-python or aiokafka with that client's defaults but for acks=all and
idempotence (``--metadata-refresh-ms`` sets their ``metadata_max_age_ms``).

Reports, per kill -9 round: when the killed broker's partitions were writable on the others
(the controller's assignment reported ``writable``, from ZooKeeper) and when the producer got its
first acknowledgement from the new owner (client view, including librdkafka's retry backoff);
per SIGSTOP round (the broker stays frozen ``--freeze-s``, then SIGCONT) the same two figures;
for scale-out: from starting the 4th broker's process (and from its listener accepting
connections) to owning its share writable; for the rolling restart: failed deliveries (the goal
is none) and the longest pause between acknowledgements of any partition. At the end every
acknowledged message is read back and checked (exactly once, in order). With ``--proxy`` the
producer and the read-back go through a `bmq proxy` instead of straight to the brokers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import cast

from bench.failover_clients import CLIENTS, Producer, make_producer
from bmq.metadata.zookeeper.layout import WRITABLE
from bmq.metadata.zookeeper.reports import decode as decode_reports
from tests.cluster.conftest import Cluster, _env
from tests.cluster.workload import SteadyProducer, verify
from tests.cluster.zookeeper import ZooKeeper
from tests.conftest import make_topic_name
from tests.proxy.conftest import ProxyProcess

PARTITIONS = 6


def _first_ack_after(producer: Producer, partitions: list[int], t: float,
                     moved: float = 0.0) -> float:
    """Seconds from ``t`` until every one of ``partitions`` had an ack after ``t + moved``.

    ``moved``: when the partitions were found writable on their new owners (seconds after
    ``t``). Only an ack after that can come from a new owner: answers the old owner had sent
    before it died or froze still reach the client a moment after ``t``."""
    worst = 0.0
    for p in partitions:
        after = [x for x in producer.ack_times[p] if x > t + moved]
        worst = max(worst, (after[0] - t) if after else float("inf"))
    return worst


def _wait(check: object, timeout: float = 30.0) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            if check():  # type: ignore[operator]
                return time.monotonic() - start
        except Exception:
            pass
        time.sleep(0.01)
    raise TimeoutError("condition not reached")


def _wait_reported_writable(cluster: Cluster, broker_id: int, topic: str, count: int,
                            timeout: float = 30.0) -> None:
    """Block until ``broker_id``'s registration reports ``count`` partitions of ``topic``
    writable. A ZooKeeper watch, not a poll: polling every partition's state every few ms
    cost this process most of a core, taken from the broker being measured."""
    done = threading.Event()

    def changed(data: bytes | None, _stat: object) -> bool | None:
        if data:
            reports = decode_reports(json.loads(data))
            if sum(1 for name, report in reports.items()
                   if name.rsplit("/", 1)[0] == topic and report[1] == WRITABLE) >= count:
                done.set()
                return False        # stop watching
        return None

    cluster.zk.DataWatch(cluster.paths.broker(broker_id), changed)
    if not done.wait(timeout):
        raise TimeoutError(f"broker {broker_id} did not report its share of {topic}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="kill -9 rounds")
    parser.add_argument("--sigstop-rounds", type=int, default=1,
                        help="SIGSTOP rounds (frozen for --freeze-s, then SIGCONT)")
    parser.add_argument("--freeze-s", type=float, default=20.0)
    parser.add_argument("--session-timeout-ms", type=int, default=None,
                        help="zookeeper_session_timeout_ms [BMQ's default]")
    parser.add_argument("--rate", type=float, default=500.0, help="messages per second")
    parser.add_argument("--s3", action="store_true",
                        help="shared storage on a throw-away SeaweedFS S3 instead of file://")
    parser.add_argument("--metadata-refresh-ms", type=int, default=None,
                        help="the producer's topic.metadata.refresh.interval.ms, with the test "
                             "workload's short back-offs [librdkafka's defaults for all]")
    parser.add_argument("--scale-outs", type=int, default=1,
                        help="times a 4th broker is started and measured (it is drained away "
                             "by SIGTERM between two)")
    parser.add_argument("--proxy", action="store_true",
                        help="the producer connects to a bmq proxy, not to the brokers")
    parser.add_argument("--client", choices=CLIENTS, default="confluent",
                        help="the producer's client library [confluent]")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bmq-failover-"))
    zk = ZooKeeper.start(base / "zk")
    (base / "c" / "shared").mkdir(parents=True)
    storage, options, seaweed = f"file://{base / 'c' / 'shared'}", {}, None
    if args.s3:
        from tests.seaweedfs import SeaweedFS

        seaweed = SeaweedFS.start(base / "s3")
        storage, options = seaweed.url("failover"), seaweed.storage_options()
    print(f"storage: {storage}", flush=True)
    env = _env()
    env.pop("BMQ_ZOOKEEPER_SESSION_TIMEOUT_MS")     # the tests' 2 s: BMQ's default unless given
    if args.session_timeout_ms is not None:
        env["BMQ_ZOOKEEPER_SESSION_TIMEOUT_MS"] = args.session_timeout_ms
    session = args.session_timeout_ms or "default"
    cluster = Cluster(base / "c", zk, storage, options, env)
    proxy: ProxyProcess | None = None
    try:
        cluster.start_controller()
        for broker_id in (1, 2, 3):
            cluster.add_broker(broker_id)
        from confluent_kafka.admin import AdminClient, NewTopic

        topic = make_topic_name("failover")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
            future.result(30)
        cluster.wait_writable(topic)
        bootstrap = cluster.bootstrap
        if args.proxy:
            proxy = ProxyProcess(base / "proxy", cluster)
            proxy.start()
            bootstrap = proxy.bootstrap
            print(f"producing through the proxy at {bootstrap}", flush=True)
        producer, refresh = make_producer(args.client, bootstrap, topic, PARTITIONS,
                                          args.rate, args.metadata_refresh_ms)
        producer.start()
        print(f"producer: {args.client} ({refresh})", flush=True)
        time.sleep(2)

        def owned(b: int) -> list[int]:
            return [p for p, o in cluster.owners(topic).items() if o == b]

        server_s: list[float] = []
        kills: list[tuple[float, float, list[int]]] = []
        for round_no in range(args.rounds):
            victim = 1 + round_no % 3
            moved = owned(victim)
            others = {1, 2, 3} - {victim}
            killed = time.monotonic()
            cluster.brokers[victim].kill()
            took = cluster.wait_writable(topic, owners=others, timeout=30)
            server_s.append(took)
            kills.append((killed, took, moved))
            print(f"kill -9 broker {victim} (partitions {moved}): writable elsewhere after "
                  f"{took:.2f}s", flush=True)
            cluster.brokers[victim].start()
            _wait(lambda v=victim: bool(owned(v)), 30)
            cluster.wait_writable(topic)
            time.sleep(1)
        if server_s:
            print(f"kill -9: writable elsewhere median {statistics.median(server_s):.2f}s "
                  f"max {max(server_s):.2f}s (session timeout {session})", flush=True)

        stop_server_s: list[float] = []
        stops: list[tuple[float, float, list[int]]] = []
        for round_no in range(args.sigstop_rounds):
            victim = 1 + round_no % 3
            moved = owned(victim)
            paused = time.monotonic()
            cluster.brokers[victim].pause()
            try:
                took = cluster.wait_writable(topic, owners={1, 2, 3} - {victim}, timeout=60)
                stop_server_s.append(took)
                stops.append((paused, took, moved))
                print(f"SIGSTOP broker {victim} (partitions {moved}): writable elsewhere after "
                      f"{took:.2f}s", flush=True)
                _wait(lambda m=moved, t=paused, w=took: _first_ack_after(
                    producer, m, t, w) < float("inf"), max(1.0, args.freeze_s - took))
                print(f"SIGSTOP broker {victim}: the producer's first ack from a new owner of "
                      f"each {_first_ack_after(producer, moved, paused, took):.2f}s after "
                      "SIGSTOP", flush=True)
            except TimeoutError:
                print(f"SIGSTOP broker {victim}: the producer got no ack for {moved} within "
                      f"{args.freeze_s:.0f}s", flush=True)
            time.sleep(max(0.0, paused + args.freeze_s - time.monotonic()))
            cluster.brokers[victim].resume()
            _wait(lambda v=victim: bool(owned(v)), 60)
            cluster.wait_writable(topic)
            time.sleep(1)

        # Scale-out: a 4th broker.
        fourth = cluster.add_broker(4, start=False)

        for attempt in range(args.scale_outs):
            if attempt:
                fourth.stop()       # SIGTERM: drains its share back to the others
                cluster.wait_writable(topic, owners={1, 2, 3})
            started = time.monotonic()
            fourth.start()
            listening = time.monotonic()
            start_cpu = fourth.cpu_seconds()    # how much of the wait was work, how much load
            _wait_reported_writable(cluster, 4, topic, PARTITIONS // 4)
            done = time.monotonic()
            print(f"scale-out: broker 4 served its share {done - listening:.2f}s after it "
                  f"accepted connections ({done - started:.2f}s after its process started; "
                  f"{listening - started:.2f}s of that from exec to accepting connections, "
                  f"using {start_cpu:.2f}s of CPU)", flush=True)
            cluster.wait_writable(topic)

        # Rolling restart of brokers 1-3 (SIGTERM drain, start again) under load.
        failed_before = len(producer.failed)
        rolled = time.monotonic()
        for broker_id in (1, 2, 3):
            cluster.brokers[broker_id].restart()
            _wait(lambda b=broker_id: bool(owned(b)), 30)
            cluster.wait_writable(topic)
        gap = max(producer.max_gap(p, after=rolled) for p in range(PARTITIONS))
        print(f"rolling restart of 3 brokers: {len(producer.failed) - failed_before} failed "
              f"deliveries, longest ack pause on a partition {gap:.2f}s "
              f"({time.monotonic() - rolled:.1f}s in all)", flush=True)
        producer.stop()
        for what, events in (("kill -9", kills), ("SIGSTOP", stops)):
            client_s = [_first_ack_after(producer, moved, at, took)
                        for at, took, moved in events]
            if client_s:
                print(f"{what}: the producer's first acknowledgement from the new owner of "
                      "every moved partition came " + ", ".join(f"{x:.2f}s" for x in client_s) +
                      f" after it (median {statistics.median(client_s):.2f}s; {args.client}, "
                      f"{refresh})")
        count = verify(cast(SteadyProducer, producer), bootstrap)    # reads any of them
        print(f"verified: {count} acknowledged messages read back exactly once, in order; "
              f"{len(producer.failed)} deliveries failed in all")
    finally:
        if proxy is not None:
            proxy.cleanup()
        cluster.cleanup()
        zk.stop()
        if seaweed is not None:
            seaweed.stop()


if __name__ == "__main__":
    main()
