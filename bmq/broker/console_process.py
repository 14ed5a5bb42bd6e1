"""The web console `bmq serve` runs: `bmq console` in a child process of its own, so that its
page rendering and its blocking cluster calls never hold the broker's event loop or its GIL,
and so that `bmq serve` imports nothing of it (start-up time unchanged). The child starts once
the broker listens (it lowers its own CPU priority), bootstrapped to serve's PLAINTEXT listener; it
ends when serve stops, and (its stdin a pipe from serve) when serve dies."""

from __future__ import annotations

import logging
import subprocess
import sys

from bmq.config import Config
from bmq.listeners import PLAINTEXT

log = logging.getLogger(__name__)
STOP_TIMEOUT_S = 5.0


def console_bootstrap(config: Config) -> str | None:
    """HOST:PORT of serve's first PLAINTEXT listener (a wildcard bind address as loopback),
    None when it has none (the console would need a principal of its own)."""
    for listener in config.listener_list:
        if listener.protocol == PLAINTEXT:
            host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(
                listener.host, listener.host)
            return f"[{host}]:{listener.port}" if ":" in host else f"{host}:{listener.port}"
    return None


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
    command = [sys.executable, "-m", "bmq", "console", "-b", bootstrap,
               "--listen", config.console_listen, "--log-level", "WARNING", "--serve-child"]
    child = subprocess.Popen(command, stdin=subprocess.PIPE)
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
