"""Hosts on one machine: each a network namespace with its own address on a bridge of the root
namespace, so a fault can cut one host off from some others while the rest still reach it.

The bridge has an address too (``Network.gateway``): the test process, in the root namespace,
reaches every host through it (the clients of a workload run there). Names carry the creating
process's pid in hex (``bmq<pid><n>-<host>`` for namespaces, ``bq<pid><n>...`` for interfaces,
at most 15 characters), so a later run removes what a dead one left behind, and several runs can
live side by side. Everything here needs root (``ip``, ``nft``)."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import ipaddress
import itertools
import os
import re
import subprocess
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

_LOCK_PATH = Path("/run/lock/bmq-faults-net.lock")
_NETNS_NAME = re.compile(r"^bmq([0-9a-f]{6})([0-9a-f]{2})-")
_LINK_NAME = re.compile(r"^bq([0-9a-f]{6})([0-9a-f]{2})")
_FIRST_HOST_OCTET = 10
_counter = itertools.count()
_live: dict[str, Network] = {}    # tag -> network, for the atexit hook
_live_lock = threading.Lock()


def ip(*args: str, input: str | None = None) -> str:
    """Run ``ip ARGS`` (``-batch -`` with ``input``); its stdout, or CalledProcessError."""
    result = subprocess.run(["ip", *args], input=input, capture_output=True, text=True)
    if result.returncode != 0:
        raise subprocess.CalledProcessError(result.returncode, ["ip", *args], result.stdout,
                                            result.stderr)
    return result.stdout


class Host:
    """One host: a namespace ``netns`` whose ``eth0`` has ``address`` on the network's subnet."""

    def __init__(self, name: str, netns: str, address: str, veth: str) -> None:
        self.name = name
        self.netns = netns
        self.address = address
        self.veth = veth    # the root namespace's end of the host's link to the bridge

    def command(self, cmd: Sequence[str]) -> list[str]:
        """``cmd`` as run inside the namespace (``ip netns exec`` execs it: same pid)."""
        return ["ip", "netns", "exec", self.netns, *cmd]

    def popen(self, cmd: Sequence[str], *, env: Mapping[str, str] | None = None,
              log: Path | None = None, cwd: Path | str | None = None,
              **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start ``cmd`` in the namespace, in its own session (signals reach only it); with
        ``log`` its stdout and stderr are appended there."""
        out: IO[bytes] | int | None = kwargs.pop("stdout", None)
        with contextlib.ExitStack() as stack:
            if log is not None:
                out = stack.enter_context(open(log, "ab"))
                kwargs["stderr"] = subprocess.STDOUT
            return subprocess.Popen(self.command(cmd), stdin=subprocess.DEVNULL, stdout=out,
                                    env=dict(env) if env is not None else None, cwd=cwd,
                                    start_new_session=True, **kwargs)

    def run(self, cmd: Sequence[str], input: str | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(self.command(cmd), input=input, capture_output=True, text=True)
        if check and result.returncode != 0:
            raise subprocess.CalledProcessError(result.returncode, cmd, result.stdout,
                                                result.stderr)
        return result

    def nft(self, script: str) -> None:
        """Apply an nftables script in this host's namespace (atomically: all or nothing)."""
        self.run(["nft", "-f", "-"], input=script)

    def __repr__(self) -> str:
        return f"<Host {self.name} {self.address} netns={self.netns}>"


class Network:
    """A bridge and one host per name; ``close()`` (or the end of a ``with``, or the process's
    exit) removes them. ``network["broker1"]`` is a host."""

    def __init__(self, names: Iterable[str]) -> None:
        names = list(names)
        assert len(set(names)) == len(names) and len(names) <= 200, names
        remove_stale()
        self.tag = f"{os.getpid():06x}{next(_counter) % 256:02x}"
        self.bridge = f"bq{self.tag}br"
        self.hosts: dict[str, Host] = {}
        with _live_lock:
            _live[self.tag] = self
        try:
            with _subnet_lock():
                self.subnet = _free_subnet()
                self.gateway = str(self.subnet.network_address + 1)
                ip("link", "add", self.bridge, "type", "bridge")
                ip("addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.bridge)
            ip("link", "set", self.bridge, "up")
            for index, name in enumerate(names):
                self._add_host(index, name)
        except BaseException:
            self.close()
            raise

    def _add_host(self, index: int, name: str) -> None:
        address = str(self.subnet.network_address + _FIRST_HOST_OCTET + index)
        host = Host(name, f"bmq{self.tag}-{name}", address, f"bq{self.tag}v{index:02x}")
        self.hosts[name] = host
        ip("netns", "add", host.netns)
        ip("link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
        ip("link", "set", host.veth, "master", self.bridge, "up")
        ip("-n", host.netns, "-batch", "-", input="\n".join([
            f"addr add {address}/{self.subnet.prefixlen} dev eth0",
            "link set eth0 up",
            "link set lo up",
            "",
        ]))
        # The latency fault routes a host's packets out through a tunnel while answers come in
        # on eth0: reverse-path filtering would drop those answers.
        host.run(["sysctl", "-q", "-w", "net.ipv4.conf.all.rp_filter=0",
                  "net.ipv4.conf.default.rp_filter=0", "net.ipv4.conf.eth0.rp_filter=0"])

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def __iter__(self) -> Iterator[Host]:
        return iter(self.hosts.values())

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the hosts' links and namespaces (killing what still runs in them) and the
        bridge. Idempotent."""
        for host in self.hosts.values():
            _remove_netns(host.netns, host.veth)
        self.hosts.clear()
        with contextlib.suppress(subprocess.CalledProcessError):
            ip("link", "del", self.bridge)
        with _live_lock:
            _live.pop(self.tag, None)


def _remove_netns(netns: str, veth: str | None = None) -> None:
    """Kill every process in ``netns``, then remove its link and the namespace. The veth is
    deleted first and explicitly: a namespace's removal takes its links away asynchronously."""
    with contextlib.suppress(subprocess.CalledProcessError):
        for pid in ip("netns", "pids", netns).split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), 9)
    if veth is not None:
        with contextlib.suppress(subprocess.CalledProcessError):
            ip("link", "del", veth)
    with contextlib.suppress(subprocess.CalledProcessError):
        ip("netns", "del", netns)


def _pid_alive(hex_pid: str) -> bool:
    return Path(f"/proc/{int(hex_pid, 16)}").exists()


def _stale(match: re.Match[str] | None) -> bool:
    """A name of this module whose process is dead, or is this process but no live network's."""
    if match is None:
        return False
    if int(match.group(1), 16) == os.getpid():
        with _live_lock:
            return match.group(1) + match.group(2) not in _live
    return not _pid_alive(match.group(1))


def remove_stale() -> list[str]:
    """Remove the namespaces and interfaces a dead run left behind; the names removed."""
    removed = []
    for line in ip("netns", "list").splitlines():
        netns = line.split()[0] if line.split() else ""
        if _stale(_NETNS_NAME.match(netns)):
            _remove_netns(netns)
            removed.append(netns)
    for line in ip("-o", "link", "show").splitlines():
        link = line.split(":")[1].strip().split("@")[0]
        if _stale(_LINK_NAME.match(link)):
            with contextlib.suppress(subprocess.CalledProcessError):
                ip("link", "del", link)
            removed.append(link)
    return removed


def leftovers(tag: str) -> list[str]:
    """Namespaces and interfaces of the network tagged ``tag`` still present (for tests)."""
    found = [line.split()[0] for line in ip("netns", "list").splitlines()
             if line.startswith(f"bmq{tag}-")]
    found += [line.split(":")[1].strip() for line in ip("-o", "link", "show").splitlines()
              if line.split(":")[1].strip().startswith(f"bq{tag}")]
    return found


@contextlib.contextmanager
def _subnet_lock() -> Iterator[None]:
    """Two runs choosing a subnet at once would choose the same one."""
    _LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
    with open(_LOCK_PATH, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _free_subnet() -> ipaddress.IPv4Network:
    """A 10.(200+x).y.0/24 that no route or address of the root namespace overlaps."""
    used = []
    for line in ip("-4", "-o", "route", "show", "table", "all").splitlines():
        first = line.split()[0] if line.split() else ""
        if first in ("local", "broadcast", "unreachable", "prohibit", "blackhole"):
            first = line.split()[1]
        with contextlib.suppress(ValueError):
            used.append(ipaddress.ip_network(first, strict=False))
    for line in ip("-4", "-o", "addr", "show").splitlines():
        used.append(ipaddress.ip_interface(line.split()[3]).network)
    start = os.getpid() % (50 * 256)
    for offset in range(50 * 256):
        index = (start + offset) % (50 * 256)
        subnet = ipaddress.IPv4Network(f"10.{200 + index // 256}.{index % 256}.0/24")
        if not any(subnet.overlaps(other) for other in used if other.prefixlen > 0):
            return subnet
    raise RuntimeError("no free 10.200-249.x.0/24 subnet")


def _close_all() -> None:
    with _live_lock:
        networks = list(_live.values())
    for network in networks:
        network.close()


atexit.register(_close_all)
