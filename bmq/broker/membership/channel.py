"""The broker's end of the liveness channel (``bmq.controller.liveness``): one TCP connection to
the active controller, held open for the life of a registration. When this process dies the
kernel closes it, and the controller moves our partitions at once instead of waiting for the
ZooKeeper session to expire.

While the channel is open the controller only moves our partitions by draining them (we hand
them over after their last flush). Once it closes without our doing, the controller may already
have removed our registration and given our partitions to others: the channel is *suspended*
and the broker acknowledges nothing (the ack lease's other half) until one of these settles it:

* a controller accepts our registration again on a new channel (nothing was moved, or the
  moves are in ZooKeeper and our follower applies them);
* it rejects it: the registration is gone, we give up every partition and register again;
* the controller we were connected to can act no more (its port refuses connections, i.e. the
  process is gone, or another controller or none is active now) and our registration is still
  there after a ``sync``: nobody removed it, so nothing moved.

A channel that cannot be re-established otherwise (the controller alive but unreachable) keeps
the broker suspended: it must not acknowledge writes the controller may have handed elsewhere.
Storage epochs keep every acknowledged acks=all write safe regardless (an owner checks the fence
after each flush, before acknowledging it); the suspension is what keeps a cut-off broker from
answering acks=1 writes, or acks=all ones with errors that are not Kafka's, for partitions it no
longer owns.

The broker opens the channel as it opens its links to other nodes' inter-broker listener
(``bmq.security.link``, its ``login``): TLS checking the controller's certificate (and its host
name, unless ``ssl.endpoint.identification.algorithm`` is empty), then SASL PLAIN or SCRAM as
the inter-broker user, SCRAM also proving the controller knows that user's credential. A
controller it cannot authenticate with, or that refuses it, holds no channel of ours: we log
it, try again later, and that controller can move our partitions only when our session expires.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from bmq.config import split_host_port
from bmq.metadata.zookeeper.layout import Paths, loads
from bmq.metadata.zookeeper.liveness import no_delay, read_line, send_line, set_keepalive
from bmq.protocol.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from bmq.security.link import Exchange, LinkAuthenticationError, NodeLogin

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 1.0
# How long we wait for the controller's answer to our hello. Once it has read the hello, the
# controller takes the channel's close for our process's death and removes our registration:
# giving up on a controller busy moving partitions (answers took over a second in the fault
# runs) had it remove live registrations, over and over.
HELLO_ANSWER_S = 10.0
RETRY_S = 0.2
POLL_S = 0.2           # how often an open channel checks whether it should be closed
REFUSED_RETRY_S = 1.0  # after a controller refused us (or we it)
UNANSWERED_RETRIES = 5  # hellos closed unanswered before that counts as a refusal


def authenticated(sock: socket.socket, host: str, login: NodeLogin | None) -> socket.socket:
    """``sock`` (connected to the controller's channel at ``host``) once logged in as
    ``login`` says: TLS-wrapped (``sock`` is then closed with the socket returned), SASL done.
    ``LinkAuthenticationError`` if the controller refused us, ``ssl.SSLError`` if its
    certificate did not verify (both ``OSError``s)."""
    if login is None:
        return sock
    no_delay(sock)
    if login.ssl is not None:
        sock = login.ssl.wrap_socket(sock, server_hostname=host)
    if login.mechanism:
        try:
            asyncio.run(login.authenticate(_line_exchange(sock)))
        except BaseException:
            sock.close()
            raise
    return sock


def _line_exchange(sock: socket.socket) -> Exchange:
    """The SASL requests of ``NodeLogin.authenticate`` as the channel's lines."""
    def ask(doc: dict[str, Any]) -> dict[str, Any]:
        send_line(sock, doc)
        answer = read_line(sock)
        if not isinstance(answer, dict):
            raise LinkAuthenticationError("the controller closed the channel while we logged in")
        return answer

    async def exchange(message: Any, _version: int) -> Any:
        if isinstance(message, SaslHandshakeRequest):
            answer = ask({"mechanism": message.mechanism})
            return SaslHandshakeResponse(error_code=int(answer.get("error", -1)),
                                         mechanisms=list(answer.get("mechanisms", [])))
        if isinstance(message, SaslAuthenticateRequest):
            answer = ask({"auth": base64.b64encode(message.auth_bytes).decode()})
            return SaslAuthenticateResponse(
                error_code=int(answer.get("error", -1)), error_message=answer.get("message"),
                auth_bytes=base64.b64decode(str(answer.get("auth", ""))))
        raise LinkAuthenticationError(f"{type(message).__name__} has no place on the channel")
    return exchange


class ControllerChannel:
    """A thread holding the channel. ``registration()`` is the czxid of our current registration
    (0: none); ``on_gone()`` is called when the controller says that registration is gone."""

    def __init__(self, zk: KazooClient, paths: Paths, broker_id: int,
                 registration: Callable[[], int], on_gone: Callable[[], object],
                 login: NodeLogin | None = None) -> None:
        self._zk = zk
        self._login = login
        self._refusal = ""      # the last refusal logged: repeats go to the debug log
        self._unanswered = 0    # hellos in a row the controller closed without an answer
        self._paths = paths
        self._broker_id = broker_id
        self._registration = registration
        self._on_gone = on_gone
        self._suspended = False
        # The registration and the controller (czxid of /controller) of the last accepted
        # channel: a suspension is about them only.
        self._held = (0, 0)
        # The active controller's document in ZooKeeper (host, pid, channel) when last read:
        # what the broker tells of its controller (DescribeConfigs' bmq.controller).
        self.active_controller: dict[str, Any] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bmq-channel", daemon=True)

    @property
    def suspended(self) -> bool:
        return self._suspended

    def describe(self) -> str:
        """The active `bmq controller` as last read in ZooKeeper: its brokers' liveness
        channel (HOST:PORT), host name and process id; "none active" without one."""
        active = self.active_controller
        if not active.get("channel"):
            return "none active"
        return (f"bmq controller, liveness channel {active['channel']}, host "
                f"{active.get('host', '?')}, pid {active.get('pid', '?')}")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=2 * POLL_S + CONNECT_TIMEOUT_S)

    def wake(self) -> None:
        """Our registration changed: hold the channel for the new one."""
        self._wake.set()

    # ------------------------------------------------------------------ the thread
    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            pause = RETRY_S
            try:
                reg = self._registration()
                if self._suspended and reg != self._held[0]:
                    # Registered anew: no controller has held a channel of this registration,
                    # so none moves its partitions but by draining or the session's expiry.
                    self._suspended = False
                controller = self._controller() if reg else None
                if self._suspended and (controller is None or controller[0] != self._held[1]):
                    self._settle(reg)       # the controller we lost is deposed or gone
                pause = self._hold(reg, *controller) if reg and controller else 1.0
            except Exception as error:   # ZooKeeper unreachable and the like: try again
                log.debug("liveness channel: %s", error)
            self._wake.wait(pause)

    def _controller(self) -> tuple[int, str, int] | None:
        """(czxid, host, port) of the active controller's channel; a watch wakes us on change."""
        watch = self._watch
        try:
            data, stat = self._zk.get(self._paths.controller, watch=watch)
        except NoNodeError:
            self.active_controller = {}
            if self._zk.exists(self._paths.controller, watch=watch) is not None:
                self._wake.set()    # created meanwhile
            return None
        self.active_controller = loads(data) or {}
        channel = self.active_controller.get("channel")
        if not channel:
            return None             # a controller of a version without channels
        host, port = split_host_port(str(channel))
        return stat.czxid, host, port

    def _watch(self, *_args: object) -> None:
        self._wake.set()

    def _settle(self, reg: int) -> None:
        """The controller whose channel ended can no longer act: if our registration survived
        it, nothing was moved and we may acknowledge again."""
        self._zk.sync(self._paths.brokers)
        stat = self._zk.exists(self._paths.broker(self._broker_id))
        if reg and stat is not None and stat.czxid == reg:
            log.info("the controller that lost our channel is gone; registration %d stands: "
                     "acknowledging again", reg)
            self._suspended = False
        else:
            self._on_gone()

    def _hold(self, reg: int, czxid: int, host: str, port: int) -> float:
        """Connect, say hello, hold the channel until it ends; the pause before the next try."""
        try:
            plain = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
        except ConnectionRefusedError:
            if self._suspended and czxid == self._held[1]:
                self._settle(reg)       # nothing listens: that controller process is gone
            return 0.5
        except OSError as error:
            log.debug("liveness channel: cannot reach the controller at %s:%d: %s",
                      host, port, error)
            return RETRY_S
        try:
            sock = authenticated(plain, host, self._login)
        except (OSError, ValueError) as error:  # refused, or its certificate did not verify
            plain.close()
            self._refused(host, port, str(error) or type(error).__name__)
            return REFUSED_RETRY_S
        with sock:
            sock.settimeout(HELLO_ANSWER_S)
            try:
                send_line(sock, {"broker": self._broker_id, "reg": reg})
                answer = read_line(sock)
            except (OSError, ValueError):
                return RETRY_S
            if not isinstance(answer, dict):
                # Not the active controller (yet): look again soon. One that keeps closing
                # on us expects another security protocol: say so, ask less often.
                self._unanswered += 1
                if self._unanswered <= UNANSWERED_RETRIES:
                    return RETRY_S
                self._refused(host, port, "it closes the channel at our hello: is its "
                              "inter-broker listener's security protocol ours?")
                return REFUSED_RETRY_S
            self._unanswered = 0
            if "error" in answer:
                self._refused(host, port, str(answer.get("message")))
                return REFUSED_RETRY_S
            if not answer.get("ok"):
                log.warning("the controller says registration %d is gone", reg)
                self._on_gone()
                return 1.0
            if self._suspended:
                log.info("liveness channel to the controller open again: acknowledging again")
            self._suspended = False
            self._held = (reg, czxid)
            self._refusal = ""
            return self._wait_closed(sock, reg)

    def _refused(self, host: str, port: int, reason: str) -> None:
        """Logged as a warning once, then at debug level while it repeats (we retry often)."""
        refusal = f"{host}:{port}: {reason}"
        log.log(logging.DEBUG if refusal == self._refusal else logging.WARNING,
                "liveness channel: cannot authenticate with the controller at %s (only the "
                "session's expiry reports this broker's death meanwhile)", refusal)
        self._refusal = refusal

    def _wait_closed(self, sock: socket.socket, reg: int) -> float:
        """Hold an accepted channel; when it ends without our doing, suspend acknowledging."""
        set_keepalive(sock)
        sock.settimeout(POLL_S)
        while not self._stop.is_set() and self._registration() == reg:
            try:
                if not sock.recv(64):
                    break
            except TimeoutError:
                continue
            except OSError:
                break
        else:
            return 0.0      # we are stopping or registered anew: a deliberate close
        self._suspended = True
        log.warning("liveness channel to the controller closed: acknowledging nothing until "
                    "it is open again or the controller is known to be gone")
        return 0.0
