"""Command line: ``python -m bench --bootstrap HOST:PORT [options]``."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import random
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench import report, transactions
from bench.config import MIN_MESSAGE_SIZE, MODES, BenchConfig
from bench.runner import consume_phase, e2e_phase, produce_phase
from bench.security import PROTOCOLS, compare
from bench.server import LocalServer
from bench.stats import PhaseResult
from bench.topic import BenchError, admin_client, check_reachable, ensure_topic, watermarks

EPILOG = """\
examples:
  python -m bench --bootstrap 127.0.0.1:9092 --messages 1000000 --producers 2
  python -m bench --bootstrap 127.0.0.1:9092 --mode e2e --rate 20 --duration 30
  python -m bench --spawn-server --messages 200000 --json out.json
  python -m bench --spawn-server --mode both --messages 500000 --report out/

Exit status: 0 when every phase finished without errors (and, in mode both,
consumed == produced), 1 otherwise, 2 when the run could not be done at all.
"""


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench", epilog=EPILOG, formatter_class=argparse.RawTextHelpFormatter,
        description="Produce and consume with confluent-kafka against any Kafka-compatible "
                    "server;\nprint MB/s, messages/s and latency percentiles.")
    target = p.add_argument_group("target")
    target.add_argument("--bootstrap", help="bootstrap address HOST:PORT[,HOST:PORT...]")
    target.add_argument("--spawn-server", action="store_true",
                        help="start a throw-away `bmq serve` (free port, temporary data dir)\n"
                             "for the run and stop it afterwards")
    target.add_argument("--server-command", metavar="CMD",
                        help="command to start the server with --spawn-server; --data-dir and\n"
                             "--listen are appended [the bmq beside this Python: bmq serve]")
    target.add_argument("--keep-data", action="store_true",
                        help="with --spawn-server: keep the data dir and server.log")
    target.add_argument("--profile-server", metavar="OUT.svg",
                        help="with --spawn-server: record the server with py-spy into OUT.svg\n"
                             "(flame graph; OUT.txt: collapsed stacks, OUT.json: speedscope)")
    target.add_argument("--security", choices=PROTOCOLS,
                        help="with --spawn-server: also serve an SSL or SASL_SSL (SCRAM-SHA-512)\n"
                             "listener, certificates and user made for the run, and run the\n"
                             "workload over it")
    target.add_argument("--compare-plaintext", action="store_true",
                        help="with --security: run the workload over PLAINTEXT first, then over\n"
                             "the secured listener, and give its MB/s as a share of plaintext's")
    w = p.add_argument_group("workload")
    w.add_argument("--mode", choices=MODES, default="both",
                   help="produce, consume (the whole topic), both (produce, then consume\n"
                        "what was produced), e2e (paced producer + tailing consumer) [both]")
    w.add_argument("--topic", default="bmq-bench", help="topic, created if missing [bmq-bench]")
    w.add_argument("--partitions", type=int, default=8,
                   help="partitions when creating the topic [8]")
    w.add_argument("--message-size", type=int, default=1024, metavar="BYTES",
                   help=f"message value size, >= {MIN_MESSAGE_SIZE} [1024]")
    w.add_argument("--messages", type=int, metavar="N",
                   help="messages to produce in total [1000000; e2e: bounded by --duration]")
    w.add_argument("--duration", type=float, metavar="S",
                   help="produce for S seconds (with --messages: whichever comes first)\n"
                        "[e2e: 30]")
    w.add_argument("--producers", type=int, default=1, metavar="K",
                   help="producer processes, each producing N/K messages [1]")
    w.add_argument("--consumers", type=int, default=1, metavar="K",
                   help="consumer processes, partitions dealt out among them [1]")
    w.add_argument("--rate", type=float, default=10.0, metavar="MB/s",
                   help="e2e: producer rate in MB/s [10]")
    w.add_argument("--warmup", type=float, default=2.0, metavar="S",
                   help="e2e: leave the first S seconds of messages out of the latency [2]")
    w.add_argument("--timeout", type=float, default=300.0, metavar="S",
                   help="upper bound on each phase; an unfinished phase is reported as\n"
                        "incomplete [300]")
    w.add_argument("--idle-timeout", type=float, default=30.0, metavar="S",
                   help="consume: give up when nothing arrived for S seconds [30]")
    c = p.add_argument_group("client settings")
    c.add_argument("--acks", choices=("0", "1", "all", "-1"), default="all", help="[all]")
    c.add_argument("--compression", choices=("none", "gzip", "snappy", "lz4", "zstd"),
                   default="none", help="[none]")
    c.add_argument("--linger-ms", type=float, default=5.0, help="[5]")
    c.add_argument("--batch-size", type=int, default=1_000_000, metavar="BYTES",
                   help="[1000000]")
    c.add_argument("--transaction-ms", type=float, default=None, metavar="MS",
                   help="transactional producers, committing every MS ms [not transactional]")
    c.add_argument("--isolation-level", choices=("read_committed", "read_uncommitted"),
                   default="read_committed", help="the consumers' isolation.level "
                                                  "[read_committed, librdkafka's default]")
    c.add_argument("--compare-transactions", action="store_true",
                   help="with --transaction-ms: produce with the idempotent producer, then "
                        "transactionally, then consume read_uncommitted and read_committed; "
                        "note the shares")
    c.add_argument("--latency-sample", type=int, default=32, metavar="N",
                   help="time every Nth produced message's delivery [32]")
    c.add_argument("-X", "--producer-config", type=_key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="extra librdkafka producer setting (repeatable)")
    c.add_argument("--consumer-config", type=_key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="extra librdkafka consumer setting (repeatable)")
    c.add_argument("--client-config", type=_key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="librdkafka setting of every client (producer,\n"
                   "consumer, admin), e.g. security.protocol=SSL (repeatable)")
    o = p.add_argument_group("output")
    o.add_argument("--json", metavar="PATH", help="also write the results as JSON ('-': stdout)")
    o.add_argument("--report", metavar="DIR",
                   help="also write DIR/report.md with plots (throughput over time,\n"
                        "latency CDF) as PNG files beside it; needs matplotlib")
    o.add_argument("--no-progress", action="store_true",
                   help="no progress bar on stderr while the phases run")
    return p


def config_from_args(args: argparse.Namespace, bootstrap: str,
                     client: dict[str, Any] | None = None) -> BenchConfig:
    return BenchConfig(
        bootstrap=bootstrap, topic=args.topic, partitions=args.partitions,
        message_size=args.message_size, messages=args.messages, duration=args.duration,
        acks=args.acks, compression=args.compression, producers=args.producers,
        consumers=args.consumers, mode=args.mode, rate_mb=args.rate, linger_ms=args.linger_ms,
        batch_size=args.batch_size, latency_sample=args.latency_sample, warmup_s=args.warmup,
        timeout_s=args.timeout, idle_timeout_s=args.idle_timeout, run_id=random.getrandbits(32),
        producer_overrides=dict(args.producer_config),
        consumer_overrides=dict(args.consumer_config),
        client_overrides={**(client or {}), **dict(args.client_config)},
        transaction_ms=args.transaction_ms, isolation_level=args.isolation_level)


def _check(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if not args.bootstrap and not args.spawn_server:
        p.error("give --bootstrap HOST:PORT or --spawn-server")
    if args.message_size < MIN_MESSAGE_SIZE:
        p.error(f"--message-size must be at least {MIN_MESSAGE_SIZE}")
    for name in ("partitions", "producers", "consumers", "latency_sample"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.messages is not None and args.messages < 1:
        p.error("--messages must be at least 1")
    for name in ("duration", "rate", "timeout", "idle_timeout"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            p.error(f"--{name} must be positive")
    if args.mode == "e2e" and (args.producers != 1 or args.consumers != 1):
        p.error("e2e uses one producer and one consumer")
    if args.profile_server and not args.spawn_server:
        p.error("--profile-server needs --spawn-server")
    if args.security and not args.spawn_server:
        p.error("--security needs --spawn-server (else give --client-config settings)")
    if args.compare_plaintext and not args.security:
        p.error("--compare-plaintext needs --security")
    if args.transaction_ms is not None and args.transaction_ms <= 0:
        p.error("--transaction-ms must be positive")
    if args.compare_transactions and (args.transaction_ms is None or args.mode != "both"):
        p.error("--compare-transactions needs --transaction-ms and --mode both")


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class _ServerWatch:
    """With a spawned server: its CPU seconds per phase, and whether it survived."""

    def __init__(self, server: LocalServer | None) -> None:
        self.server = server

    @contextlib.contextmanager
    def measure(self, phases: list[PhaseResult]) -> Iterator[None]:
        server = self.server
        before = server.cpu_seconds() if server else None
        count = len(phases)
        yield
        if server is None:
            return
        after = server.cpu_seconds()
        for phase in phases[count:]:
            if before is not None and after is not None:
                phase.extra["server_cpu_s"] = round(after - before, 3)
            code = server.exit_code()
            if code is not None:
                phase.complete = False
                phase.notes.append(f"the spawned server exited with code {code}")
        if server.exit_code() is not None:
            _say(f"the spawned server exited; the end of its log:\n{server.log_tail()}")


def run(cfg: BenchConfig, server: LocalServer | None = None,
        show_progress: bool = False) -> tuple[int, list[PhaseResult]]:
    """Do the phases of cfg.mode; returns the partition count and the results."""
    cpu = _ServerWatch(server)
    admin = admin_client(cfg)
    check_reachable(admin, cfg.bootstrap)
    partitions, note = ensure_topic(admin, cfg, create=cfg.mode != "consume")
    if note:
        _say(f"note: {note}")
    results: list[PhaseResult] = []
    before: list[tuple[int, int]] = []
    if cfg.mode in ("produce", "both"):
        if cfg.mode == "both":
            before = watermarks(cfg, partitions)
        limit = cfg.message_limit()
        amount = f"for {cfg.duration_limit():g} s" if limit is None else str(limit)
        _say(f"producing {amount} messages of {cfg.message_size} B with "
             f"{cfg.producers} process(es)...")
        with cpu.measure(results):
            results.append(produce_phase(cfg, show_progress))
    if cfg.mode in ("consume", "both"):
        marks = watermarks(cfg, partitions)
        if cfg.mode == "both":
            ranges = [(p, before[p][1], marks[p][1]) for p in range(partitions)]
        else:
            ranges = [(p, low, high) for p, (low, high) in enumerate(marks)]
        total = sum(end - first for _, first, end in ranges)
        _say(f"consuming {total} messages from {partitions} partitions with "
             f"{min(cfg.consumers, partitions)} process(es)...")
        with cpu.measure(results):
            consumed = consume_phase(cfg, ranges, show_progress)
            results.append(consumed)
        if cfg.mode == "both" and consumed.messages != results[0].messages:
            consumed.complete = False
            consumed.notes.append(f"consumed {consumed.messages} messages but "
                                  f"{results[0].messages} were acknowledged")
    if cfg.mode == "e2e":
        marks = watermarks(cfg, partitions)
        _say(f"e2e: {cfg.rate_mb:g} MB/s for {cfg.duration_limit() or '-'} s"
             f"{'' if cfg.messages is None else f' or {cfg.messages} messages'}...")
        with cpu.measure(results):
            results.extend(e2e_phase(cfg, [(p, high) for p, (_, high) in enumerate(marks)],
                                     show_progress))
    return partitions, results


@contextlib.contextmanager
def _py_spy(pid: int, out: str) -> Iterator[None]:
    exe = Path(sys.executable).with_name("py-spy")
    spy_cmd = str(exe) if exe.exists() else shutil.which("py-spy")
    if spy_cmd is None:
        raise BenchError("--profile-server needs py-spy (pip install py-spy)")
    fmt = {".txt": "raw", ".json": "speedscope"}.get(Path(out).suffix, "flamegraph")
    spy = subprocess.Popen([spy_cmd, "record", "--pid", str(pid), "--output", out,
                            "--format", fmt, "--rate", "100", "--subprocesses"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        try:
            _, err = spy.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            spy.kill()
            _, err = spy.communicate()
        if spy.returncode not in (0, -signal.SIGINT):
            _say(f"py-spy exited with {spy.returncode}: {err.decode(errors='replace')[-500:]}")
        else:
            _say(f"server profile written to {out}")


def _run_secured(args: argparse.Namespace, plain: BenchConfig,
                 server: LocalServer) -> tuple[BenchConfig, int, list[PhaseResult]]:
    """The workload over the spawned server's secured listener, after the same over PLAINTEXT
    (to a topic of its own) with --compare-plaintext."""
    secure = server.secure
    assert secure is not None
    cfg = config_from_args(args, f"{server.host}:{secure.port}", secure.client)
    _say(f"over {secure.protocol} on {cfg.bootstrap}")
    baseline: list[PhaseResult] = []
    if args.compare_plaintext:
        _say(f"first over PLAINTEXT on {plain.bootstrap}")
        _, baseline = run(dataclasses.replace(plain, topic=f"{plain.topic}-plaintext"), server,
                          show_progress=not args.no_progress)
    partitions, results = run(cfg, server, show_progress=not args.no_progress)
    if baseline:
        compare(baseline, results, secure.protocol)
    return cfg, partitions, baseline + results


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    _check(p, args)
    server_desc: str | None = None
    server: LocalServer | None = None
    try:
        with contextlib.ExitStack() as stack:
            bootstrap = args.bootstrap
            if args.spawn_server:
                server = LocalServer(args.server_command, keep_data=args.keep_data,
                                     security=args.security)
                stack.enter_context(server)
                bootstrap = server.bootstrap
                server_desc = server.describe()
                _say(f"started {server_desc} on {bootstrap}")
                if args.profile_server:
                    stack.enter_context(_py_spy(server.pid, args.profile_server))
            cfg = config_from_args(args, bootstrap)
            if server is not None and server.secure is not None:
                cfg, partitions, results = _run_secured(args, cfg, server)
            elif args.compare_transactions:
                partitions = cfg.partitions
                results = transactions.compare(
                    cfg, lambda c: run(c, server, show_progress=not args.no_progress)[1])
            else:
                partitions, results = run(cfg, server, show_progress=not args.no_progress)
    except BenchError as error:
        _say(f"error: {error}")
        return 2
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    # with --json - the JSON owns stdout and the table goes to stderr
    table_out = sys.stderr if args.json == "-" else sys.stdout
    print(report.summary(cfg, partitions, results, server_desc), file=table_out, flush=True)
    if args.json:
        report.write_json(args.json, report.document(cfg, partitions, results, server_desc))
    if args.report:
        from bench.markdown import write_report

        try:
            path = write_report(args.report, cfg, partitions, results, server_desc)
        except RuntimeError as error:
            _say(f"error: {error}")
            return 2
        _say(f"report written to {path}")
    ok = all(r.complete and r.errors == 0 for r in results)
    return 0 if ok else 1
