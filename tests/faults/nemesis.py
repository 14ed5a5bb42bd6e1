"""The faults, Jepsen's nemesis: each starts on named hosts of a ``Network`` and is undone later,
and every start and undo is recorded in a ``History`` as an operation of process ``nemesis``
(``f`` = ``start`` or ``stop``, ``value`` = the fault's description, invoke/ok times = how long
applying it took).

Network faults are nftables tables in the hosts' namespaces (one table per fault, deleted to
undo it), latency is ``relay.py``'s delay line, a clock jump rewrites the host's clock
offset (``clock.py``), and kill -9 / SIGSTOP go through the cluster's processes.
``Schedule.random`` draws a seeded schedule of bounded faults; ``ScheduleRunner`` applies one on a
thread and always heals at the end."""

from __future__ import annotations

import itertools
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from tests.faults import relay as relay_module
from tests.faults.clock import Clock
from tests.faults.history import History
from tests.faults.hosts import Host, Network

NEMESIS = "nemesis"
CLIENTS = "clients"    # a pseudo-host: the test process, where the workloads' clients run
_RELAY_MARK = 0x4D51


class Processes(Protocol):
    """What process faults need of a cluster: its processes by host."""

    def kill(self, host: str) -> None:
        """kill -9 of the host's processes."""

    def restart(self, host: str) -> None:
        """Start the host's killed processes again."""

    def pause(self, host: str) -> None:
        """SIGSTOP of the host's processes."""

    def resume(self, host: str) -> None:
        """SIGCONT."""

    def clock(self, host: str) -> Clock:
        """The wall clock the host's processes run on."""


class Fault:
    """One fault on ``hosts``; ``Nemesis`` starts it and undoes it (``with`` undoes it too)."""

    kind: ClassVar[str]

    def __init__(self, nemesis: Nemesis, hosts: Sequence[str], **params: Any) -> None:
        self.nemesis = nemesis
        self.id = next(nemesis.ids)
        self.hosts = tuple(hosts)
        self.params = params
        self.active = False

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.id, "hosts": list(self.hosts), **self.params}

    def start(self) -> None:
        raise NotImplementedError

    def undo(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Fault:
        return self

    def __exit__(self, *exc: object) -> None:
        self.nemesis.undo(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"


class _Firewall(Fault):
    """An nftables table ``bmq_fault<ID>`` in each target host's namespace."""

    def table(self) -> str:
        return f"bmq_fault{self.id}"

    def rules(self, host: str) -> tuple[list[str], list[str]]:
        """The host's input and output rules."""
        raise NotImplementedError

    def start(self) -> None:
        for name in self.hosts:
            inputs, outputs = self.rules(name)
            self.nemesis.host(name).nft("\n".join([
                f"table inet {self.table()} {{",
                "  chain input { type filter hook input priority -10; policy accept;",
                *(f"    {rule}" for rule in inputs), "  }",
                "  chain output { type filter hook output priority -10; policy accept;",
                *(f"    {rule}" for rule in outputs), "  }",
                "}", ""]))

    def undo(self) -> None:
        for name in self.hosts:
            result = self.nemesis.host(name).run(
                ["nft", "delete", "table", "inet", self.table()], check=False)
            if result.returncode != 0 and "No such file" not in result.stderr:
                raise RuntimeError(f"undo of {self}: {result.stderr}")


class Partition(_Firewall):
    """Every packet between a host of ``hosts`` and one of ``peers`` is dropped, both ways."""

    kind = "partition"

    def rules(self, host: str) -> tuple[list[str], list[str]]:
        peers = ", ".join(self.nemesis.address(peer) for peer in self.params["peers"])
        return [f"ip saddr {{ {peers} }} drop"], [f"ip daddr {{ {peers} }} drop"]


class OneWayLoss(_Firewall):
    """Packets reach the hosts, their answers to ``peers`` (everyone when None) are lost."""

    kind = "one_way_loss"

    def rules(self, host: str) -> tuple[list[str], list[str]]:
        peers = self.params["peers"]
        if peers is None:
            return [], ['oifname "eth0" drop']
        addresses = ", ".join(self.nemesis.address(peer) for peer in peers)
        return [], [f"ip daddr {{ {addresses} }} drop"]


class Loss(_Firewall):
    """``percent`` % of the packets each host sends and of those it receives, at random."""

    kind = "loss"

    def rules(self, host: str) -> tuple[list[str], list[str]]:
        rule = f"numgen random mod 100 < {int(self.params['percent'])} drop"
        return [f'iifname "eth0" {rule}'], [f'oifname "eth0" {rule}']


class Latency(Fault):
    """Every packet the hosts send is ``ms`` +- ``jitter_ms`` late (``relay.py``): a round trip
    with them takes ``ms`` longer. Their packets to the subnet are routed (an ip rule looked up
    before main's) into the relay's tunnel; the relay sends them on with a mark that skips the
    rule."""

    kind = "latency"

    def __init__(self, nemesis: Nemesis, hosts: Sequence[str], **params: Any) -> None:
        super().__init__(nemesis, hosts, **params)
        self.relays: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        device, table = f"slow{self.id}", str(1000 + self.id)
        for name in self.hosts:
            host = self.nemesis.host(name)
            relay = host.popen([sys.executable, relay_module.__file__, device,
                                str(self.params["ms"]), str(self.params["jitter_ms"]),
                                hex(_RELAY_MARK)], stdout=subprocess.PIPE)
            self.relays.append(relay)
            assert relay.stdout is not None
            if relay.stdout.readline() != b"ready\n":
                raise RuntimeError(f"the relay of {self} on {name} did not start")
            host.run(["ip", "-batch", "-"], input="\n".join([
                f"link set {device} up",
                f"route add {self.nemesis.network.subnet} dev {device} src {host.address} "
                f"table {table}",
                f"rule add not fwmark {_RELAY_MARK:#x} lookup {table} pref {table}",
                ""]))

    def undo(self) -> None:
        for name in self.hosts:
            self.nemesis.host(name).run(["ip", "rule", "del", "pref", str(1000 + self.id)],
                                        check=False)
        for relay in self.relays:
            relay.kill()
            relay.wait(10)
        self.relays.clear()


class ClockJump(Fault):
    """The hosts' processes' wall clocks step by ``seconds`` (and back on undo)."""

    kind = "clock_jump"

    def start(self) -> None:
        for name in self.hosts:
            clock = self.nemesis.processes_of().clock(name)
            clock.set(clock.offset_s + int(self.params["seconds"]))

    def undo(self) -> None:
        for name in self.hosts:
            clock = self.nemesis.processes_of().clock(name)
            clock.set(clock.offset_s - int(self.params["seconds"]))


class _ProcessFault(Fault):
    """``actions``: what ``Processes`` does to each host to start the fault, and to undo it."""

    actions: ClassVar[tuple[str, str]]

    def start(self) -> None:
        for name in self.hosts:
            getattr(self.nemesis.processes_of(), self.actions[0])(name)

    def undo(self) -> None:
        for name in self.hosts:
            getattr(self.nemesis.processes_of(), self.actions[1])(name)


class Kill(_ProcessFault):
    """kill -9 of the hosts' processes; undo starts them again."""

    kind = "kill"
    actions = ("kill", "restart")


class Pause(_ProcessFault):
    """SIGSTOP of the hosts' processes; undo is SIGCONT."""

    kind = "pause"
    actions = ("pause", "resume")


class Nemesis:
    """Starts faults on ``network``'s hosts (process faults on ``processes``), records them in
    ``history`` and undoes them all on ``heal()``. Each method starts its fault at once and
    returns it: ``with nemesis.partition("broker1", ["zk1"]): ...`` undoes it at the end."""

    def __init__(self, network: Network, processes: Processes | None = None,
                 history: History | None = None) -> None:
        self.network = network
        self.processes = processes
        self.history = history if history is not None else History()
        self.ids = itertools.count(1)
        self.active: list[Fault] = []
        self._lock = threading.Lock()

    def host(self, name: str) -> Host:
        return self.network[name]

    def address(self, name: str) -> str:
        return self.network.gateway if name == CLIENTS else self.network[name].address

    def processes_of(self) -> Processes:
        assert self.processes is not None, "process faults need the cluster's processes"
        return self.processes

    # ------------------------------------------------------------------ the faults
    def partition(self, hosts: str | Sequence[str], peers: str | Sequence[str]) -> Fault:
        """Cut ``hosts`` off from ``peers`` (``CLIENTS`` is the test process), both ways."""
        return self.apply(Partition(self, _names(hosts), peers=_names(peers)))

    def one_way_loss(self, hosts: str | Sequence[str],
                     peers: str | Sequence[str] | None = None) -> Fault:
        return self.apply(OneWayLoss(self, _names(hosts),
                                     peers=None if peers is None else _names(peers)))

    def loss(self, hosts: str | Sequence[str], percent: int) -> Fault:
        return self.apply(Loss(self, _names(hosts), percent=percent))

    def latency(self, hosts: str | Sequence[str], ms: int, jitter_ms: int = 0) -> Fault:
        return self.apply(Latency(self, _names(hosts), ms=ms, jitter_ms=jitter_ms))

    def clock_jump(self, hosts: str | Sequence[str], seconds: int) -> Fault:
        return self.apply(ClockJump(self, _names(hosts), seconds=seconds))

    def kill(self, hosts: str | Sequence[str]) -> Fault:
        return self.apply(Kill(self, _names(hosts)))

    def pause(self, hosts: str | Sequence[str]) -> Fault:
        return self.apply(Pause(self, _names(hosts)))

    # ------------------------------------------------------------------ start, undo, heal
    def apply(self, fault: Fault) -> Fault:
        op = self.history.invoke(NEMESIS, "start", fault.describe())
        try:
            with self._lock:
                self.active.append(fault)
                fault.active = True
            fault.start()
        except Exception as exc:
            self.history.info(op, repr(exc))
            self.undo(fault)
            raise
        self.history.ok(op)
        return fault

    def undo(self, fault: Fault) -> None:
        with self._lock:
            if not fault.active:
                return
            fault.active = False
            self.active.remove(fault)
        op = self.history.invoke(NEMESIS, "stop", fault.describe())
        try:
            fault.undo()
        except Exception as exc:
            self.history.fail(op, repr(exc))
            raise
        self.history.ok(op)

    def heal(self) -> None:
        """Undo every active fault, newest first; the first error is raised after all tried."""
        errors = []
        while self.active:
            try:
                self.undo(self.active[-1])
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]


def _names(value: str | Iterable[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


KINDS = ("partition", "one_way_loss", "loss", "latency", "clock_jump", "kill", "pause")
_PROCESS_KINDS = ("kill", "pause")


@dataclass(frozen=True)
class Step:
    """One fault of a schedule: ``kind`` on ``hosts`` from ``at_s`` for ``duration_s``."""

    at_s: float
    duration_s: float
    kind: str
    hosts: tuple[str, ...]
    params: dict[str, Any] = field(default_factory=dict, hash=False)

    def start(self, nemesis: Nemesis) -> Fault:
        method = getattr(nemesis, self.kind)
        fault: Fault = method(self.hosts, **self.params)
        return fault


@dataclass
class Schedule:
    seed: int
    steps: list[Step]

    @classmethod
    def random(cls, seed: int, duration_s: float, kinds: Sequence[str],
               hosts: Sequence[str], peers: Sequence[str] | None = None,
               fault_s: tuple[float, float] = (2.0, 10.0), gap_s: tuple[float, float] = (1.0, 3.0),
               combined: float = 0.3,
               targets: Mapping[str, Sequence[str]] | None = None) -> Schedule:
        """Faults of ``kinds`` one after another on one of ``hosts`` each (``targets[kind]``
        instead, for the kinds it names: clock jumps only where processes run under the
        clock), ``fault_s`` long with ``gap_s`` between them, all over within ``duration_s``;
        partitions and one-way loss cut the host off from a random part of ``peers`` (default:
        the other hosts). With probability ``combined`` a network fault also has a kill -9 or
        SIGSTOP (those of ``kinds`` that may hit its host) of its host inside its window. The
        same seed gives the same schedule."""
        unknown = set(kinds) - set(KINDS)
        assert kinds and not unknown, f"unknown fault kinds {unknown}"
        rng = random.Random(seed)
        steps: list[Step] = []
        eligible = {kind: list((targets or {}).get(kind, hosts)) for kind in kinds}
        at = rng.uniform(*gap_s)
        while True:
            duration = rng.uniform(*fault_s)
            if at + duration > duration_s:
                break
            kind = rng.choice(list(kinds))
            host = rng.choice(eligible[kind])
            steps.append(Step(round(at, 3), round(duration, 3), kind, (host,),
                              _random_params(rng, kind, host, peers or hosts)))
            process_kinds = [other for other in kinds
                             if other in _PROCESS_KINDS and host in eligible[other]]
            if kind not in _PROCESS_KINDS and process_kinds and rng.random() < combined:
                offset = rng.uniform(0, duration / 2)
                steps.append(Step(round(at + offset, 3),
                                  round(rng.uniform(1.0, duration - offset), 3),
                                  rng.choice(process_kinds), (host,), {}))
            at += duration + rng.uniform(*gap_s)
        return cls(seed, sorted(steps, key=lambda step: step.at_s))

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "steps": [
            {"at_s": s.at_s, "duration_s": s.duration_s, "kind": s.kind, "hosts": list(s.hosts),
             **s.params} for s in self.steps]}


def _random_params(rng: random.Random, kind: str, host: str,
                   peers: Sequence[str]) -> dict[str, Any]:
    others = [peer for peer in peers if peer != host]
    if kind == "partition":
        return {"peers": tuple(rng.sample(others, rng.randint(1, len(others))))}
    if kind == "one_way_loss":
        return {"peers": None if rng.random() < 0.5 else
                tuple(rng.sample(others, rng.randint(1, len(others))))}
    if kind == "loss":
        return {"percent": 30}
    if kind == "latency":
        return {"ms": 500, "jitter_ms": 100}
    if kind == "clock_jump":
        return {"seconds": rng.choice([-300, -120, 120, 300])}
    return {}


class ScheduleRunner:
    """Applies a schedule on a thread (``start()``), timed from when it starts; ``stop()``
    ends it early; either way every fault is undone at the end (``nemesis.heal()``). Errors
    (a fault that could not start or be undone) are in ``errors`` and raised by ``stop()``."""

    def __init__(self, nemesis: Nemesis, schedule: Schedule) -> None:
        self.nemesis = nemesis
        self.schedule = schedule
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)

    def start(self) -> ScheduleRunner:
        self._thread.start()
        return self

    def _run(self) -> None:
        events = sorted([(step.at_s, 1, index) for index, step in enumerate(self.schedule.steps)]
                        + [(step.at_s + step.duration_s, 0, index)
                           for index, step in enumerate(self.schedule.steps)])
        started: dict[int, Fault] = {}
        begin = time.monotonic()
        try:
            for at, is_start, index in events:
                if self._stop.wait(max(0.0, begin + at - time.monotonic())):
                    return
                try:
                    if is_start:
                        started[index] = self.schedule.steps[index].start(self.nemesis)
                    elif index in started:
                        self.nemesis.undo(started.pop(index))
                except Exception as exc:
                    self.errors.append(exc)
        finally:
            try:
                self.nemesis.heal()
            except Exception as exc:
                self.errors.append(exc)

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def done(self) -> bool:
        return not self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        if self.errors:
            raise self.errors[0]
