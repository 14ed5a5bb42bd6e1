"""The web console `bmq serve` runs: `bmq console` in a child process of its own, so that its
page rendering and its blocking cluster calls never hold the broker's event loop or its GIL,
and so that `bmq serve` imports nothing of it (start-up time unchanged). The child starts once
the broker listens (it lowers its own CPU priority), bootstrapped to serve's PLAINTEXT
listener, its users signing in with SCRAM when serve has a SCRAM listener. It ends when serve
stops, and when serve dies (its stdin is a pipe from serve)."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys

from bmq.config import Config
from bmq.config.settings import split_host_port
from bmq.listeners import PLAINTEXT, SASL_PLAINTEXT, Listener
from bmq.security.scram import MECHANISMS
from bmq.security.session import SecurityConfigError, enabled_mechanisms

log = logging.getLogger(__name__)
STOP_TIMEOUT_S = 5.0


def _local(host: str, port: int) -> str:
    """Where a local client reaches ``host``:``port`` (a wildcard bind address as loopback)."""
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _address(listener: Listener) -> str:
    return _local(listener.host, listener.port)


def console_bootstrap(config: Config) -> str | None:
    """HOST:PORT of serve's first PLAINTEXT listener, None when it has none (the console
    would need a principal of its own)."""
    for listener in config.listener_list:
        if listener.protocol == PLAINTEXT:
            return _address(listener)
    return None


def scram_sign_in(config: Config) -> list[str]:
    """The console's SCRAM sign-in flags when serve has SCRAM users on a SASL_PLAINTEXT
    listener: its users sign in there and the console acts as them (serve's users are then
    the console's; without SCRAM the console is open, on loopback)."""
    for listener in config.listener_list:
        if listener.protocol != SASL_PLAINTEXT:
            continue
        try:
            mechanisms = enabled_mechanisms(config, listener.name)
        except SecurityConfigError:
            continue
        scram = [m for m in mechanisms if m in MECHANISMS]
        if scram:
            chosen = "SCRAM-SHA-512" if "SCRAM-SHA-512" in scram else scram[0]
            return ["--scram-sign-in", chosen, "--scram-bootstrap", _address(listener)]
    return []


def metrics_of(config: Config) -> list[str]:
    """The console's --metrics flag when serve has a metrics port (charts, rates, Index
    Query), reached as a local client reaches serve's listeners."""
    if not config.metrics_port:
        return []
    return ["--metrics", f"http://{_local(config.listen_host, config.metrics_port)}"]


def start_console(config: Config) -> subprocess.Popen[bytes] | None:
    """The console child of ``config.console_listen``, or None (turned off, or no listener
    it can use: logged)."""
    if not config.console_listen:
        return None
    bootstrap = console_bootstrap(config)
    if bootstrap is None:
        log.warning("web console not started: serve has no PLAINTEXT listener; run `bmq "
                    "console -b HOST:PORT -X ...` with a principal of its own")
        return None
    # Bound here and handed to the child: a port in use is this warning, not the child's
    # error in serve's log after serve said it started a console.
    try:
        host, port = split_host_port(config.console_listen)
        listener = socket.create_server(
            (host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    except OSError as error:
        log.warning("web console not started: cannot listen on %s: %s (--console-listen "
                    "moves it, --no-console turns it off)", config.console_listen,
                    error.strerror or error)
        return None
    with listener:
        command = [sys.executable, "-m", "bmq", "console", "-b", bootstrap,
                   "--listen", config.console_listen, "--listen-fd", str(listener.fileno()),
                   "--log-level", "WARNING", "--serve-child", *scram_sign_in(config),
                   *metrics_of(config)]
        child = subprocess.Popen(command, stdin=subprocess.PIPE, pass_fds=[listener.fileno()])
    log.info("web console at http://%s/ (pid %d)", config.console_listen, child.pid)
    return child


def stop_console(child: subprocess.Popen[bytes] | None) -> None:
    if child is None:
        return
    child.terminate()
    try:
        child.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
    if child.stdin is not None:
        child.stdin.close()
