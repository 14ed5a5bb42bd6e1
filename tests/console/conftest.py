"""`bmq console` in front of a `bmq serve`, each a real process, and Debian's Chromium headless
driven by Playwright (no browser download: scripts/setup.sh installs the chromium package).

Screenshots go to each test's tmp dir; with BMQ_CONSOLE_SCREENSHOTS=DIR they are copied there
too (docs/console/ holds one set)."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.conftest import BrokerProcess, bmq_command, free_port

CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps calling Google's hosts, which this
# closed network refuses; --no-sandbox because the tests may run as root.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
START_TIMEOUT_S = 20.0
# Whether the console answers, over HTTPS too: its test certificate is not the system's.
_UNVERIFIED = ssl.create_default_context()
_UNVERIFIED.check_hostname = False
_UNVERIFIED.verify_mode = ssl.CERT_NONE


class ConsoleProcess:
    """`bmq console` of ``cluster`` on a free port."""

    def __init__(self, workdir: Path, bootstrap: str, *args: str, scheme: str = "http") -> None:
        """``args``: more of `bmq console`'s flags (sign-in, -X properties, HTTPS: then
        ``scheme`` https)."""
        self.port = free_port()
        self.scheme = scheme
        self.log_path = workdir / "console.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [*bmq_command(), "console", "-b", bootstrap, "--listen", f"127.0.0.1:{self.port}",
             *args], stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def url(self, path: str = "/") -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}{path}"

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"bmq console exited: {self.log_path.read_text()}")
            try:
                with urllib.request.urlopen(self.url("/static/htmx.min.js"), timeout=1,
                                            context=_UNVERIFIED):
                    return
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        raise RuntimeError(f"bmq console did not start: {self.log_path.read_text()}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


@pytest.fixture(scope="module")
def console(module_broker: BrokerProcess,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleProcess]:
    process = ConsoleProcess(tmp_path_factory.mktemp("console"), module_broker.bootstrap)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), "Debian's chromium is missing: run scripts/setup.sh --tests"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    yield tab
    context.close()


@pytest.fixture
def screenshot(page: Page, tmp_path: Path) -> Callable[[str], Path]:
    """Saves the page as NAME.png in the test's tmp dir (and in BMQ_CONSOLE_SCREENSHOTS)."""
    copies = os.environ.get("BMQ_CONSOLE_SCREENSHOTS")

    def take(name: str) -> Path:
        path = tmp_path / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 0
        if copies:
            Path(copies).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(copies) / path.name)
        return path

    return take
