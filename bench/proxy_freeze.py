"""One broker frozen (SIGSTOP) or killed (kill -9) under idempotent producers behind a proxy:
do the partitions of the healthy brokers keep their latency, how soon are the frozen broker's
partitions writable again, does any producer die?

    .venv/bin/python -m bench.proxy_freeze [--fault sigstop|kill] [--freeze-s 12] [--rounds 1]
        [--producers proxy,brokers] [--rate 1000] [--partitions 12]
        [--session-timeout-ms MS] [--librdkafka-defaults] [--client-config K=V] [--debug]

A throw-away ZooKeeper, a controller, 3 brokers on ``file://`` and a `bmq proxy`. Each producer
(confluent-kafka, idempotent, acks=all; the test workload's settings) writes ``--rate``
messages/s over the partitions of a topic of its own: ``proxy`` is bootstrapped on the proxy,
``brokers`` on the brokers (whose Metadata sends it to the proxy too), ``broker2`` on broker 2
alone (the victim: its Metadata after SIGCONT is stale). After a few seconds
broker 2 is frozen (or killed) for ``--freeze-s``, then resumed (or started again).

Reports per round and producer: the longest pause between acknowledgements of a partition of a
healthy broker while the fault lasted, and of the victim's from the fault to 2 s after its end,
acks/s during that window, and fatal errors; at the end, every acknowledged message read back
(once, at its offset). ``--debug`` writes librdkafka's debug log to stderr.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from bench.failover_clients import LIBRDKAFKA_DEFAULTS
from tests.cluster.conftest import Cluster, _env
from tests.cluster.workload import SteadyProducer, verify
from tests.cluster.zookeeper import ZooKeeper
from tests.proxy.conftest import ProxyProcess


class WatchedProducer(SteadyProducer):
    """A SteadyProducer that records librdkafka's fatal errors (the producer is dead after one)
    and may write librdkafka's debug log."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float,
                 debug: bool = False, settings: dict[str, Any] | None = None
                 ) -> None:
        """``settings``: librdkafka settings over the test workload's."""
        self.fatal: list[str] = []
        extra: dict[str, Any] = {"error_cb": self._on_error, **(settings or {})}
        if debug:     # to stderr, from librdkafka's threads (a Python logger falls behind)
            extra["debug"] = "eos,msg,protocol,topic"
        super().__init__(bootstrap, topic, partitions, rate, extra)

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self.fatal.append(str(error))

    def _run(self) -> None:
        try:
            super()._run()
        except KafkaException as error:     # produce() after a fatal error
            if not self.fatal:
                self.fatal.append(str(error))

    def stop(self, flush_timeout: float = 120.0) -> None:
        if self.fatal:                      # nothing more will be delivered
            self._stop.set()
            self._thread.join()
            return
        super().stop(flush_timeout)


def window_gap(ack_times: list[float], start: float, end: float) -> float:
    """The longest time in [start, end] without an acknowledgement (the window's edges count:
    a partition acknowledged nothing in it has the whole window as its gap)."""
    times = [start, *(t for t in ack_times if start < t < end), end]
    return max(b - a for a, b in itertools.pairwise(times))


@dataclass
class FaultWindow:
    """What one fault did to one producer."""

    healthy_gap: float      # the longest pause of a healthy broker's partition while it lasted
    victim_gap: float       # ... of a partition the victim owned, until 2 s after it
    acks_per_s: float
    fatal: list[str]

    def describe(self) -> str:
        return (f"max ack gap: healthy partitions {self.healthy_gap:.2f}s, victim's "
                f"{self.victim_gap:.2f}s; {self.acks_per_s:.0f} acks/s; fatal errors: "
                f"{self.fatal or 'none'}")


def fault_window(producer: WatchedProducer, victim_partitions: set[int], start: float,
                 undone: float, end: float) -> FaultWindow:
    """The healthy brokers' partitions from the fault (``start``) until it was undone (SIGCONT,
    or the killed broker started again: then partitions move back to it), the victim's until
    ``end``."""
    healthy = [window_gap(producer.ack_times[p], start, undone)
               for p in range(producer.partitions) if p not in victim_partitions]
    victims = [window_gap(producer.ack_times[p], start, end) for p in victim_partitions]
    acks = sum(1 for p in range(producer.partitions) for t in producer.ack_times[p]
               if start < t < end)
    return FaultWindow(healthy_gap=max(healthy, default=0), victim_gap=max(victims, default=0),
                       acks_per_s=acks / (end - start), fatal=list(producer.fatal))


def start_producers(cluster: Cluster, proxy: ProxyProcess, bootstraps: list[str],
                    partitions: int, rate: float, debug: bool = False,
                    settings: dict[str, Any] | None = None) -> list[WatchedProducer]:
    """One producer per entry of ``bootstraps`` (where it bootstraps: ``proxy``, ``brokers``,
    or ``broker<N>`` alone), each on a topic of its own (created through the proxy)."""
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
    producers = []
    for n, via in enumerate(bootstraps):
        topic = f"freeze-{n}-{via}"
        for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
            future.result(30)
        cluster.wait_writable(topic)
        bootstrap = (proxy.bootstrap if via == "proxy" else cluster.bootstrap if via == "brokers"
                     else cluster.brokers[int(via.removeprefix("broker"))].bootstrap)
        producer = WatchedProducer(bootstrap, topic, partitions, rate, debug, settings)
        producer.start()
        producers.append(producer)
    return producers


def fault_round(cluster: Cluster, producers: list[WatchedProducer], fault: str,
                freeze_s: float, victim: int = 2) -> list[FaultWindow]:
    """SIGSTOP (``fault`` "sigstop") or kill -9 ("kill") broker ``victim`` for ``freeze_s``,
    then SIGCONT (or start it again); what each producer saw from the fault to 2 s after, once
    the victim owns partitions again."""
    owned = {p.topic: {i for i, o in cluster.owners(p.topic).items() if o == victim}
             for p in producers}
    broker = cluster.brokers[victim]
    start = time.monotonic()
    broker.pause() if fault == "sigstop" else broker.kill()
    time.sleep(freeze_s)
    undone = time.monotonic()
    broker.resume() if fault == "sigstop" else broker.start()
    time.sleep(2)
    end = time.monotonic()
    cluster.wait_for(lambda: all(victim in cluster.owners(p.topic).values() for p in producers),
                     60, f"broker {victim} back")
    return [fault_window(p, owned[p.topic], start, undone, end) for p in producers]


def read_back(producers: list[WatchedProducer], bootstrap: str) -> None:
    """Stop the producers, read every acknowledged message back (once, at its offset: else
    AssertionError) and report."""
    for producer in producers:
        producer.stop()
        count = verify(producer, bootstrap)
        print(f"{producer.topic}: {count} acknowledged messages read back exactly once at "
              f"their offsets; {len(producer.failed)} failed deliveries; fatal: "
              f"{producer.fatal or 'none'}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fault", choices=("sigstop", "kill"), default="sigstop")
    parser.add_argument("--freeze-s", type=float, default=12.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--producers", default="proxy,brokers",
                        help="comma-separated: where each producer bootstraps "
                             "(proxy|brokers|broker<N>)")
    parser.add_argument("--rate", type=float, default=1000.0, help="messages/s per producer")
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--session-timeout-ms", type=int, default=None,
                        help="zookeeper_session_timeout_ms [BMQ's default]")
    parser.add_argument("--librdkafka-defaults", action="store_true",
                        help="librdkafka's own back-offs and metadata refresh [the test "
                             "workload's short ones]")
    parser.add_argument("--client-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a librdkafka setting of every producer (repeatable)")
    parser.add_argument("--debug", action="store_true",
                        help="librdkafka's eos,msg,protocol,topic debug log, to stderr")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bmq-proxy-freeze-"))
    zk = ZooKeeper.start(base / "zk")
    (base / "c" / "shared").mkdir(parents=True)
    env = _env()
    env.pop("BMQ_ZOOKEEPER_SESSION_TIMEOUT_MS")     # the tests' 2 s: BMQ's default unless given
    if args.session_timeout_ms is not None:
        env["BMQ_ZOOKEEPER_SESSION_TIMEOUT_MS"] = args.session_timeout_ms
    cluster = Cluster(base / "c", zk, f"file://{base / 'c' / 'shared'}", {}, env)
    proxy = ProxyProcess(base / "proxy", cluster)
    producers: list[WatchedProducer] = []
    try:
        cluster.start_controller()
        for broker_id in (1, 2, 3):
            cluster.add_broker(broker_id)
        proxy.start()
        producers = start_producers(
            cluster, proxy, args.producers.split(","), args.partitions, args.rate, args.debug,
            {**(LIBRDKAFKA_DEFAULTS if args.librdkafka_defaults else {}),
             **dict(setting.split("=", 1) for setting in args.client_config)})
        print(f"{len(producers)} producers ({args.producers}) at {args.rate:.0f} msg/s each, "
              f"{args.partitions} partitions; {args.fault} of broker 2 for {args.freeze_s}s, "
              f"session timeout {args.session_timeout_ms or 'default'}; in {base}", flush=True)
        for round_no in range(args.rounds):
            time.sleep(3)
            windows = fault_round(cluster, producers, args.fault, args.freeze_s)
            for producer, window in zip(producers, windows, strict=True):
                print(f"round {round_no + 1}, {producer.topic}: {window.describe()}",
                      flush=True)
        read_back(producers, proxy.bootstrap)
    finally:
        for producer in producers:
            producer._stop.set()
        proxy.cleanup()
        cluster.cleanup()
        zk.stop()


if __name__ == "__main__":
    main()
