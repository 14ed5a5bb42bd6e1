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

Authentication (``ChannelSecurity``): the channel speaks the security protocol of the
controller's inter-broker listener (its ``listeners`` / ``inter.broker.listener.name``; only the
host and the protocol count, the port is ephemeral), as the brokers' inter-broker listener does.
SSL and SASL_SSL: TLS with the listener's keystore, and on SSL a client certificate the
truststore verifies is always required (its subject mapped by ``ssl.principal.mapping.rules``);
SASL_*: the mechanism's exchange (PLAIN or SCRAM, checked against the credentials the cluster
keeps in ZooKeeper) before the hello. The principal must then be one the brokers would serve
their internal APIs to: with an authorizer, one allowed CLUSTER_ACTION on the cluster (the
super users the nodes log in as). A peer that fails any of it is answered an error (when it got
that far), closed and logged; its hello is never read as a broker's, so it moves nothing. A
PLAINTEXT inter-broker listener leaves the channel unauthenticated, as Kafka's PLAINTEXT
controller listener is.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import socket
import ssl
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient

from bmq.config import Config
from bmq.listeners import Listener
from bmq.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from bmq.metadata.zookeeper.documents import ZkDocuments
from bmq.metadata.zookeeper.layout import Paths
from bmq.metadata.zookeeper.liveness import no_delay, read_line, send_line, set_keepalive
from bmq.protocol.errors import ErrorCode
from bmq.security.loading import load_security_metadata, role_security
from bmq.security.session import ANONYMOUS, Security, Session
from bmq.security.tls import server_context
from bmq.startup import ExitCode, StartupError

log = logging.getLogger(__name__)

HELLO_TIMEOUT_S = 5.0


class Refused(Exception):
    """A peer the channel does not admit (why, for the log)."""


class ChannelSecurity:
    """How the channel authenticates its peers: as the inter-broker listener of ``config``."""

    def __init__(self, config: Config, listener: Listener, security: Security,
                 context: ssl.SSLContext | None) -> None:
        self._config = config
        self._listener = listener
        self._security = security
        self._context = context

    def load(self, zk: KazooClient, paths: Paths) -> None:
        """Blocking: read the credentials and ACLs from ZooKeeper, and follow them."""
        load_security_metadata(self._security, self._config, ZkDocuments(zk, paths))

    def authenticate(self, conn: socket.socket) -> tuple[socket.socket, Any]:
        """The channel's socket (TLS-wrapped if so) and the peer's hello, once the peer proved
        it is a node; ``Refused`` (or ``OSError``, ``ValueError``) otherwise. Closes ``conn``
        only through the socket it returns (or on failure)."""
        sock = conn
        if self._context is not None:
            sock = self._context.wrap_socket(conn, server_side=True)
        try:
            return sock, self._hello(sock)
        except BaseException:
            sock.close()
            raise

    def _hello(self, sock: socket.socket) -> Any:
        session = Session(self._security, self._listener)
        extra = {"peername": sock.getpeername(),
                 "ssl_object": sock if isinstance(sock, ssl.SSLSocket) else None}
        session.accepted(extra.get)
        while True:
            line = read_line(sock)
            if not isinstance(line, dict):
                raise Refused("closed before its hello" if line is None else "not a hello")
            if "mechanism" in line:
                error, enabled = session.handshake(str(line["mechanism"]))
                send_line(sock, {"error": int(error), "mechanisms": enabled})
                if error:
                    raise Refused(f"SaslHandshake with {line['mechanism']!r}: "
                                  f"{ErrorCode(error).name}")
            elif "auth" in line:
                result = session.authenticate(base64.b64decode(str(line["auth"])))
                send_line(sock, {"error": int(result.error), "message": result.message,
                                 "auth": base64.b64encode(result.auth_bytes).decode()})
                if result.error:
                    raise Refused(f"SASL authentication failed: {result.message}")
            else:
                break
        if session.principal == ANONYMOUS:
            self._refuse(sock, ErrorCode.SASL_AUTHENTICATION_FAILED, "not authenticated")
        authorizer = self._security.authorizer
        if authorizer is not None and authorizer.enabled and not authorizer.authorize(
                session.principal, session.host, Operation.CLUSTER_ACTION,
                ResourceType.CLUSTER, CLUSTER_NAME):
            self._refuse(sock, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                         f"{session.principal} may not CLUSTER_ACTION on the cluster")
        return line

    @staticmethod
    def _refuse(sock: socket.socket, error: ErrorCode, reason: str) -> None:
        with contextlib.suppress(OSError):
            send_line(sock, {"error": int(error), "message": reason})
        raise Refused(reason)


def channel_security(config: Config) -> ChannelSecurity | None:
    """The channel's security from the inter-broker listener's settings (None: PLAINTEXT);
    a ``StartupError`` for settings that cannot serve it."""
    listener = config.listener_list[0]
    if not listener.tls and not listener.sasl:
        return None
    security, _ = role_security(config, links=False)
    context = security.tls_contexts.get(listener.name)
    if listener.tls and not listener.sasl:
        # Without SASL the certificate is the only proof: always required here, whatever
        # ssl.client.auth says (a context of the channel's own).
        context = server_context(config, listener.name)
        context.verify_mode = ssl.CERT_REQUIRED
        if not context.get_ca_certs():
            raise StartupError(f"listener {listener.name}: the liveness channel verifies the "
                               f"brokers' certificates: it needs ssl.truststore.location",
                               ExitCode.USAGE)
    return ChannelSecurity(config, listener, security, context)


class LivenessServer:
    """Accepts brokers' channels on a thread per connection.

    ``on_hello(broker, reg)`` says whether to accept (True), reject (False: the registration is
    gone) or close without an answer (None: not active). ``on_close(broker, reg)`` is called when
    an accepted channel ends, unless ``close_all`` ended it.
    """

    def __init__(self, host: str, on_hello: Callable[[int, int], bool | None],
                 on_close: Callable[[int, int], None],
                 security: ChannelSecurity | None = None) -> None:
        self._listener = socket.create_server((host, 0), backlog=128)
        self._security = security
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
                conn, address = self._listener.accept()
            except OSError:
                if self._stopped:
                    return
                continue
            peer = f"{address[0]}:{address[1]}"
            threading.Thread(target=self._serve, args=(conn, peer), name="bmq-liveness-conn",
                             daemon=True).start()

    def _serve(self, conn: socket.socket, peer: str) -> None:
        conn.settimeout(HELLO_TIMEOUT_S)
        no_delay(conn)
        try:
            if self._security is None:
                hello = read_line(conn)
            else:
                conn, hello = self._security.authenticate(conn)
            broker, reg = int(hello["broker"]), int(hello["reg"])
        except (Refused, OSError, ValueError, KeyError, TypeError) as error:
            conn.close()
            if self._security is not None:
                log.warning("liveness channel: refused %s: %s", peer,
                            str(error) or type(error).__name__)
            return
        with conn:
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
            except (OSError, ValueError):   # ValueError: a TLS socket ``close_all`` shut
                pass
            with self._lock:
                del self._open[conn]
                ours = conn in self._dropped
                self._dropped.discard(conn)
            if not ours and not self._stopped:
                self._on_close(broker, reg)
