"""The controller's liveness channel: every broker keeps one TCP connection to the active
controller, and the connection's end is the prompt sign that the broker's process is gone.

A process that dies (kill -9, a crash, an exit) has its sockets closed by the kernel at once,
so the controller hears of it within milliseconds instead of after the ZooKeeper session
timeout. The controller then deletes that broker incarnation's registration itself (in a
transaction that checks the controller epoch), which makes the death visible to everyone as a
session expiry would, and reassigns its partitions with epoch + 1.

The wire format is in ``bmq.metadata.zookeeper.liveness``.

Safety never rests on the channel: a broker that is alive but cut off from the controller is
fenced on storage by the higher epoch its partitions' new owners open them with (an owner
checks the fence after each flush and before acknowledging it), and it stops acknowledging as
soon as it sees its channel end (``bmq.broker.membership.channel``).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable

from bmq.metadata.zookeeper.liveness import read_line, send_line, set_keepalive

log = logging.getLogger(__name__)

HELLO_TIMEOUT_S = 5.0


class LivenessServer:
    """Accepts brokers' channels on a thread per connection.

    ``on_hello(broker, reg)`` says whether to accept (True), reject (False: the registration is
    gone) or close without an answer (None: not active). ``on_close(broker, reg)`` is called when
    an accepted channel ends, unless ``close_all`` ended it.
    """

    def __init__(self, host: str, on_hello: Callable[[int, int], bool | None],
                 on_close: Callable[[int, int], None]) -> None:
        self._listener = socket.create_server((host, 0), backlog=128)
        self._on_hello = on_hello
        self._on_close = on_close
        self._lock = threading.Lock()
        self._open: dict[socket.socket, tuple[int, int]] = {}
        self._dropped: set[socket.socket] = set()     # ended by us: not a broker's death
        self._stopped = False
        self._thread = threading.Thread(target=self._accept, name="bmq-liveness", daemon=True)

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self.close_all()

    def close_all(self) -> None:
        """End every channel (this controller stepped down): brokers find the next one."""
        with self._lock:
            conns = list(self._open)
            self._dropped.update(conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def _accept(self) -> None:
        while not self._stopped:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                if self._stopped:
                    return
                continue
            threading.Thread(target=self._serve, args=(conn,), name="bmq-liveness-conn",
                             daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(HELLO_TIMEOUT_S)
                hello = read_line(conn)
                broker, reg = int(hello["broker"]), int(hello["reg"])
            except (OSError, ValueError, KeyError, TypeError):
                return
            verdict = self._on_hello(broker, reg)
            if verdict is None:
                return
            try:
                send_line(conn, {"ok": verdict})
            except OSError:
                return
            if not verdict:
                return
            set_keepalive(conn)
            conn.settimeout(None)
            with self._lock:
                self._open[conn] = (broker, reg)
            try:
                while conn.recv(64):    # nothing is sent after the hello; b"" is the end
                    pass
            except OSError:
                pass
            with self._lock:
                del self._open[conn]
                ours = conn in self._dropped
                self._dropped.discard(conn)
            if not ours and not self._stopped:
                self._on_close(broker, reg)
