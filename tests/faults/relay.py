"""A slow link without netem (this kernel has none): run inside a host's namespace, it opens a
tunnel device, and the nemesis routes every packet the host sends to its subnet into it; each
packet comes out again ``delay`` +- ``jitter`` ms later, in the order it went in, through a raw
socket whose packets carry a firewall mark that routes them out of ``eth0`` as usual.

So, as netem on the host's egress would: every packet the host sends (TCP on connections old
and new, UDP, ICMP) is late, a round trip with the host takes ``delay`` longer, packets it
receives are untouched. The device goes away with this process (kill it to undo the fault).

    python -m tests.faults.relay DEVICE DELAY_MS JITTER_MS MARK
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import random
import socket
import struct
import sys
import threading
import time

_TUNSETIFF = 0x400454CA
_IFF_TUN = 0x0001
_IFF_NO_PI = 0x1000
_SO_MARK = 36


def open_tunnel(name: str) -> int:
    """A TUN device named ``name`` (IP packets, no header), gone when the descriptor closes."""
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, _TUNSETIFF, struct.pack("16sH", name.encode(), _IFF_TUN | _IFF_NO_PI))
    return fd


class DelayLine:
    """Packets in, each released at max(its arrival + a delay, the previous release): late by
    ``delay_ms`` +- ``jitter_ms`` (uniform), never reordered."""

    def __init__(self, delay_ms: float, jitter_ms: float, seed: int | None = None) -> None:
        self.delay_s = delay_ms / 1000
        self.jitter_s = jitter_ms / 1000
        self._random = random.Random(seed)
        self._queue: collections.deque[tuple[float, bytes]] = collections.deque()
        self._ready = threading.Condition()
        self._last_release = 0.0

    def put(self, packet: bytes, now: float) -> float:
        late = self.delay_s + self._random.uniform(-self.jitter_s, self.jitter_s)
        with self._ready:
            self._last_release = max(self._last_release, now + max(0.0, late))
            self._queue.append((self._last_release, packet))
            self._ready.notify()
            return self._last_release

    def take(self) -> bytes:
        """The next packet, once its release time has come (blocks)."""
        with self._ready:
            while True:
                if self._queue:
                    wait = self._queue[0][0] - time.monotonic()
                    if wait <= 0:
                        return self._queue.popleft()[1]
                    self._ready.wait(wait)
                else:
                    self._ready.wait()


def _destination(packet: bytes) -> str:
    return socket.inet_ntoa(packet[16:20])


def run(device: str, delay_ms: float, jitter_ms: float, mark: int) -> None:
    tunnel = open_tunnel(device)
    out = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    out.setsockopt(socket.SOL_SOCKET, _SO_MARK, mark)
    line = DelayLine(delay_ms, jitter_ms)

    def send() -> None:
        while True:
            packet = line.take()
            # As a link would: a packet that cannot go out is lost.
            with contextlib.suppress(OSError):
                out.sendto(packet, (_destination(packet), 0))

    threading.Thread(target=send, daemon=True).start()
    print("ready", flush=True)
    while True:
        packet = os.read(tunnel, 65535)
        if len(packet) >= 20 and packet[0] >> 4 == 4:
            line.put(packet, time.monotonic())


if __name__ == "__main__":
    run(sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4], 0))
