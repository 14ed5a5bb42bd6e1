"""`bmq serve` runs the web console (a child process bootstrapped to serve's own listener) on
console_listen unless turned off, and the console ends with serve, a kill -9 included."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.conftest import BrokerFactory, free_port
from tests.console.test_access import MECHANISM, sign_in
from tests.security.conftest import PASSWORD, USER, add_user

WAIT_S = 20.0


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.mark.slow
def test_serve_runs_the_console_unless_turned_off(broker_factory: BrokerFactory, page: Page,
                                                  screenshot: Callable[[str], Path]) -> None:
    port = free_port()
    broker = broker_factory(env={"BMQ_CONSOLE_LISTEN": f"127.0.0.1:{port}"},
                            extra_args=["--metrics-port", str(free_port())])
    _until(lambda: _answers(port), f"no console on {port}")
    page.goto(f"http://127.0.0.1:{port}/cluster")
    expect(page.locator("nav .bootstrap")).to_have_text(broker.bootstrap)
    expect(page.locator("body")).to_contain_text(f"{broker.host}:{broker.port}")
    # serve's metrics port is its console's --metrics: the charts, not the hint to give it.
    expect(page.locator("#metrics")).to_be_visible()
    expect(page.locator("#metrics-off")).to_have_count(0)
    screenshot("serve-console")
    # serve killed with SIGKILL: its console sees its stdin close and ends too.
    os.kill(broker.pid, signal.SIGKILL)
    _until(lambda: not _answers(port), "the console outlived a killed bmq serve")

    quiet = free_port()
    broker_factory(env={"BMQ_CONSOLE_LISTEN": f"127.0.0.1:{quiet}"},
                   extra_args=["--no-console"])
    time.sleep(3)       # long enough for a console to bind (it binds within ~1 s)
    assert not _answers(quiet)

    # The console's port in use: serve serves all the same, and says why it has no console.
    with socket.create_server(("127.0.0.1", 0)) as taken:
        held = taken.getsockname()[1]
        crowded = broker_factory(env={"BMQ_CONSOLE_LISTEN": f"127.0.0.1:{held}"})
        refusal = f"web console not started: cannot listen on 127.0.0.1:{held}: Address " \
            "already in use"
        _until(lambda: refusal in crowded.log_text(), crowded.log_tail())


@pytest.mark.slow
def test_serve_with_scram_users_has_its_console_ask_for_them(
        broker_factory: BrokerFactory, page: Page) -> None:
    port, plain, sasl = free_port(), free_port(), free_port()
    broker = broker_factory(env={"BMQ_CONSOLE_LISTEN": f"127.0.0.1:{port}"}, config={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": MECHANISM,
    }, port=plain, start=False)
    add_user(broker.data_dir, USER, PASSWORD, MECHANISM)
    broker.start()
    _until(lambda: _answers(port), f"no console on {port}")
    sign_in(page, f"http://127.0.0.1:{port}/cluster", USER, "wrong")
    expect(page.locator(".error")).to_contain_text("unknown user or wrong password")
    page.fill("#password", PASSWORD)
    page.click("#sign-in button[type=submit]")
    expect(page.locator("nav .user")).to_have_text(f"{USER} (cluster user)")
    expect(page.locator("nav .bootstrap")).to_have_text(f"127.0.0.1:{sasl}")
    # serve stopped: its console stops with it, cleanly (its stdin watcher once made the
    # interpreter's shutdown abort: "Fatal Python error: ... <stdin> at interpreter shutdown").
    broker.stop()
    assert not _answers(port)
    assert "Fatal Python error" not in broker.log_text(), broker.log_tail()
