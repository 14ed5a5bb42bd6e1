"""A reader's walk through the README: every example block in document order, in one
temporary working directory (the reader's checkout), against the servers the blocks start.

What the walk changes, and why:
- the README's ports are this walk's free ports (9092-9095: the first broker, the next
  listener or brokers and `bmq local`'s proxy; 9100: metrics; 2181: `bmq local`'s ZooKeeper;
  8080: `bmq serve`'s web console, set by BMQ_CONSOLE_LISTEN; 8081: a `bmq console`), in
  every block, and `BMQ_BOOTSTRAP` is the first of them (the tools' default, localhost:9092);
- `make serve` runs what the Makefile runs after its set-up, `bmq serve $(ARGS)`, and a `bmq
  serve` without `--listen` or `--config` gets `--listen` on the walk's port; `bmq local` gets
  `--port` and `--zookeeper-port`;
- a sh block that starts a server first stops the running one (Ctrl-C), as the README tells
  the reader; a server runs in the background until the next one, as in a second terminal;
- a command under a comment line ``# in a second terminal`` (or a third, or another: any
  ``# in ... terminal``) is started in the background and the walk goes on, the servers already
  running kept: a second server, or a long-running command such as ``bmq mirror run``. A server
  is waited for until its port (``--listen``) accepts connections; another command, when the
  comment quotes a line of its output (``# in a third terminal; wait for "mirroring
  invoices-0"``), until it has printed that line. Each is stopped (Ctrl-C, in the reverse order
  of their starts) at the end of its README section (``## ...``), where the README tells the
  reader to stop them, and at the end of the walk;
- with ``shortcuts`` (the CI walk), the servers' log cleaner looks every second and the
  compaction example's wait for it is cut from 40 s to 5 s (the slow walk waits as written).

Commands that cannot run here are parsed by their real command line (test_readme.py's
checks) and listed with the reason (``NOT_RUN``); Spark blocks run only in the slow walk.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bmq.config import load_config
from tests.cli.test_readme import README, ROOT, Block, _blocks, _check_command, _commands
from tests.conftest import free_port

VENV_BIN = Path(sys.executable).parent
README_PORTS = (9092, 9093, 9094, 9095)
ASSIGNMENT = r"[A-Z_][A-Z0-9_]*=\S*"
SERVER = re.compile(rf"^({ASSIGNMENT} )*(make serve|bmq serve|bmq local)\b")
TERMINAL = re.compile(r"^#\s*in (a|another|a second|a third|a fourth) terminal\b", re.I)
WAIT_FOR = re.compile(r'\bwait for "([^"]+)"')
SPARK = "Spark (a JVM and a local session: over a minute on the 2-core VM): the slow walk"

# Commands of the README that this machine cannot run, each with the reason: they are parsed.
NOT_RUN: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^make (test|test-slow|lint)\b"),
     "the linters and the test suite: what CI runs, this walk included"),
    (re.compile(r"\b(zk:2181|s3:8333|namenode)\b"),
     "a deployment's hosts (zk:2181, s3:8333): parsed; bmq local's cluster runs its examples"),
    (re.compile(r"^docker compose\b"),
     "no docker here: docker-compose.yml is checked by test_compose_schema.py and "
     "tests/cluster/test_compose.py"),
    (re.compile(r"^(TESTS=\S+ )?scripts/librdkafka_suite\.sh\b"),
     "builds librdkafka and runs its suite: 12-15 minutes"),
    (re.compile(r"^(\.venv/bin/python -m bench|bench/run_local\.sh)\b"),
     "a benchmark: minutes at full load"),
    (re.compile(r"^\.venv/bin/(pytest|python tools/)"),
     "a checkout's development commands: the suite and the code generator, run by CI"),
    (re.compile(r"^python spark_jobs/"), SPARK),
    (re.compile(r"^(BMQ_\w+=\S+ )*\.venv/bin/(pytest|python -m tests\.faults)\b"),
     "the fault tests: network namespaces and minutes per run; tests/faults runs them"),
    (re.compile(r"(^|\| )(scripts/(java_clients|kafka)\.sh|java -cp)\b"),
     "Kafka's Java client and tools, a JVM each: tests/java and tests/kafka_tools run them"),
]


def not_run_reason(line: str, slow: bool) -> str | None:
    for pattern, reason in NOT_RUN:
        if pattern.search(line) and not (slow and reason == SPARK):
            return reason
    return None


def logical_lines(text: str) -> list[str]:
    """The block's commands as bash reads them: continuations joined, comment lines and blank
    lines dropped (a trailing comment stays: bash ignores it)."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [line.strip() for line in joined.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def terminal_commands(text: str) -> list[tuple[str, str | None]]:
    """The block's logical lines, each with the ``# in ... terminal`` comment line right above
    it (None: the reader's first terminal)."""
    commands: list[tuple[str, str | None]] = []
    terminal = None
    for line in re.sub(r"\\\n\s*", " ", text).splitlines():
        line = line.strip()
        if TERMINAL.match(line):
            terminal = line
        elif line and not line.startswith("#"):
            commands.append((line, terminal))
            terminal = None
    return commands


def section_starts(readme: Path = README) -> list[int]:
    """The line numbers of the README's sections (``## `` headings outside code blocks)."""
    starts, fenced = [], False
    for number, line in enumerate(readme.read_text().splitlines(), 1):
        fenced ^= line.startswith("```")
        if not fenced and line.startswith("## "):
            starts.append(number)
    return starts


def _consecutive_free_ports(count: int) -> int:
    while True:
        base = free_port()
        if base + count < 65536 and all(_bindable(base + i) for i in range(1, count)):
            return base


def _accepts(port: int) -> bool:
    """A server listens on ``port`` and accepts a connection."""
    if _bindable(port):
        return False
    try:
        socket.create_connection(("127.0.0.1", port), 1).close()
    except OSError:
        return False
    return True


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class Ports:
    kafka: int = field(default_factory=lambda: _consecutive_free_ports(len(README_PORTS)))
    metrics: int = field(default_factory=free_port)
    zookeeper: int = field(default_factory=free_port)
    # 8080: `bmq serve`'s web console (console_listen); 8081: a `bmq console` of the README's
    console: int = field(default_factory=free_port)
    second_console: int = field(default_factory=free_port)

    def mapping(self) -> dict[str, str]:
        ports = {str(p): str(self.kafka + i) for i, p in enumerate(README_PORTS)}
        return {**ports, "9100": str(self.metrics), "2181": str(self.zookeeper),
                "8080": str(self.console), "8081": str(self.second_console)}

    def rewrite(self, text: str) -> str:
        mapping = self.mapping()
        return re.sub(r"\b(909[2-5]|9100|2181|808[01])\b", lambda m: mapping[m.group(1)],
                      text)


@dataclass
class Background:
    """A server or long-running command of the README, running in the background."""
    command: str
    process: subprocess.Popen[bytes]
    log: Path
    offset: int     # where its output starts in ``log``

    def output(self) -> str:
        with self.log.open("rb") as log:
            log.seek(self.offset)
            return log.read().decode(errors="replace")


@dataclass
class Step:
    line: int          # of the block in README.md
    what: str          # the command, or the block's kind and first line
    outcome: str       # "ran", "started", "written", or why it was not run
    output: str = ""


class Walk:
    """Runs the README's blocks in order; ``steps`` records what happened to each."""

    def __init__(self, workdir: Path, *, slow: bool, shortcuts: bool) -> None:
        self.workdir = workdir
        self.slow = slow
        self.shortcuts = shortcuts
        self.ports = Ports()
        self.steps: list[Step] = []
        self.failures: list[str] = []
        self.seconds: dict[int, float] = {}   # by block line
        self.server: Background | None = None        # in the reader's first terminal
        self.terminals: list[Background] = []       # in the others, oldest first
        self.server_log = workdir / "server.log"
        if slow:   # the reader's checkout has the Spark job
            (workdir / "spark_jobs").symlink_to(ROOT / "spark_jobs")

    # ------------------------------------------------------------------ environment
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BMQ_")}
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
        env["BMQ_BOOTSTRAP"] = f"localhost:{self.ports.kafka}"
        env["BMQ_HTTP"] = f"http://localhost:{self.ports.metrics}"   # bmq query's default
        return env

    def server_env(self) -> dict[str, str]:
        env = {**self.env(), "PYTHONUNBUFFERED": "1"}
        del env["BMQ_BOOTSTRAP"], env["BMQ_HTTP"]
        env["BMQ_CONSOLE_LISTEN"] = f"127.0.0.1:{self.ports.console}"   # the README's 8080
        if self.shortcuts:
            env["BMQ_LOG_CLEANER_BACKOFF_MS"] = "1000"
        return env

    # ------------------------------------------------------------------ the walk
    def run(self) -> None:
        """Every block, going on past a failing one (each is recorded in ``failures``)."""
        sections = section_starts()
        section = 0
        try:
            for block in _blocks():
                started = time.monotonic()
                try:
                    block_section = sum(start < block.line for start in sections)
                    if block_section != section:
                        section = block_section
                        self.stop_terminals()   # the end of the section that started them
                    self.block(block)
                except Exception as error:   # every failing block is listed, not just the first
                    self.failures.append(f"README.md:{block.line}: {error!r}")
                self.seconds[block.line] = time.monotonic() - started
        finally:
            self.stop_terminals()
            self.stop_server()

    def block(self, block: Block) -> None:
        text = self.ports.rewrite(block.text)
        if block.lang == "sh":
            self.shell(block, text)
        elif block.lang == "python":
            self.python(block, text)
        elif block.lang == "toml":
            self.toml(block, text)
        elif block.lang == "text":
            self.steps.append(Step(block.line, "text", "a figure, not a command"))
        else:
            raise AssertionError(f"README.md:{block.line}: a ```{block.lang} block: the walk "
                                 "does not know how to run it (tests/cli/readme_walk.py)")

    def shell(self, block: Block, text: str) -> None:
        originals = terminal_commands(block.text)
        if any(SERVER.match(line) and terminal is None for line, terminal in originals):
            self.stop_server()      # "stop make serve first"
        rewritten = [line for line, _terminal in terminal_commands(text)]
        for (original, terminal), line in zip(originals, rewritten, strict=True):
            reason = not_run_reason(original, self.slow)
            if reason is not None:
                for command in _commands(Block("sh", block.line, original + "\n")):
                    _check_command(command)
                self.steps.append(Step(block.line, original, reason))
            elif terminal is not None:
                self.start_in_terminal(block, line, terminal)
            elif SERVER.match(original):
                self.start_server(block, line)
            else:
                self.steps.append(Step(block.line, original, "ran", self.bash(block, line)))

    def bash(self, block: Block, line: str, timeout: float = 120) -> str:
        proc = subprocess.run(["bash", "-c", line], cwd=self.workdir, env=self.env(),
                              capture_output=True, text=True, timeout=timeout, check=False)
        assert proc.returncode == 0, (f"README.md:{block.line}: `{line}` exited "
                                      f"{proc.returncode}\n{proc.stdout}\n{proc.stderr}"
                                      f"{self.server_tail()}")
        return proc.stdout

    def python(self, block: Block, text: str) -> None:
        first = text.splitlines()[0]
        if "pyspark" in text and not self.slow:
            compile(text, f"README.md:{block.line}", "exec")
            self.steps.append(Step(block.line, f"python: {first}", SPARK))
            return
        if self.shortcuts:
            text = text.replace("time.sleep(40)", "time.sleep(5)")
        named = re.match(r"# ([\w-]+\.py)\b", first)
        script = self.workdir / (named.group(1) if named else f"readme-{block.line}.py")
        script.write_text(text)
        output = self.bash(block, f"python {shlex.quote(script.name)}", timeout=300)
        self.steps.append(Step(block.line, f"python: {first}", "ran", output))

    def toml(self, block: Block, text: str) -> None:
        named = re.match(r"# (add to )?([\w.-]+\.toml)\b", text)
        assert named, (f"README.md:{block.line}: a TOML block's first line names its file "
                       "('# bmq.toml ...' or '# add to bmq.toml ...')")
        path = self.workdir / named.group(2)
        with path.open("a" if named.group(1) else "w") as out:
            out.write(text)
        load_config(str(path), environ={})
        self.steps.append(Step(block.line, named.group(0), "written and loaded"))

    # ------------------------------------------------------------------ servers
    def start_server(self, block: Block, line: str) -> None:
        """A server in the reader's first terminal."""
        self.server = self.launch(block, line, self.server_log)
        self.steps.append(Step(block.line, line, "started"))

    def start_in_terminal(self, block: Block, line: str, terminal: str) -> None:
        """A server or a long-running command in a terminal of its own."""
        log = self.workdir / f"terminal-{len(self.terminals) + 1}.log"
        started = self.launch(block, line, log)
        self.terminals.append(started)
        if not SERVER.match(line) and (wait_for := WAIT_FOR.search(terminal)):
            self.wait_until(block, started, lambda: wait_for.group(1) in started.output())
        self.steps.append(Step(block.line, line, "started"))

    def launch(self, block: Block, line: str, log: Path) -> Background:
        """Started in the background, as the README's ``line`` (its ports the walk's), and,
        if it is a server, waited for until it is ready."""
        words = shlex.split(line, comments=True)
        env = self.server_env()
        while words and re.fullmatch(ASSIGNMENT, words[0]):
            name, _, value = words.pop(0).partition("=")
            env[name] = value
        if words[:2] == ["make", "serve"]:
            args = next((w.removeprefix("ARGS=") for w in words if w.startswith("ARGS=")), "")
            words = ["bmq", "serve", *shlex.split(args)]
        if words[:2] == ["bmq", "serve"] and not {"--listen", "--config"} & set(words):
            words += ["--listen", f"127.0.0.1:{self.ports.kafka}"]
        if words[:2] == ["bmq", "local"]:
            words += ["--port", str(self.ports.kafka),
                      "--zookeeper-port", str(self.ports.zookeeper)]
        command = shlex.join(words)
        with log.open("ab") as out:
            offset = out.tell()
            out.write(f"\n===== README.md:{block.line}: {command}\n".encode())
            out.flush()
            process = subprocess.Popen(
                ["bash", "-c", "exec " + command], cwd=self.workdir, env=env,
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
        started = Background(command, process, log, offset)
        if words[:2] == ["bmq", "local"]:
            self.wait_until(block, started, lambda: "ready; Ctrl-C" in started.output())
        elif SERVER.match(command):
            port = self.ports.kafka
            if "--listen" in words:
                port = int(words[words.index("--listen") + 1].rpartition(":")[2])
            self.wait_until(block, started, lambda: _accepts(port))
        return started

    def wait_until(self, block: Block, started: Background, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if started.process.poll() is not None:
                raise AssertionError(f"README.md:{block.line}: `{started.command}` exited "
                                     f"{started.process.returncode}{self.server_tail()}")
            if ready():
                return
            time.sleep(0.1)
        raise AssertionError(f"README.md:{block.line}: `{started.command}` not ready in "
                             f"120 s{self.server_tail()}")

    def stop_server(self) -> None:
        """Ctrl-C, as the reader stops it."""
        if self.server is not None:
            server, self.server = self.server, None
            self.stop(server)

    def stop_terminals(self) -> None:
        """Ctrl-C in each other terminal, the last started first (a mirror before its
        target)."""
        while self.terminals:
            self.stop(self.terminals.pop())

    def stop(self, running: Background) -> None:
        process = running.process
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
                raise AssertionError(f"`{running.command}` ignored Ctrl-C for 60 s"
                                     f"{self.server_tail()}") from None
        assert process.returncode == 0, (f"`{running.command}` exited {process.returncode}"
                                         f"{self.server_tail()}")

    def server_tail(self) -> str:
        logs = [self.server_log, *sorted(self.workdir.glob("terminal-*.log"))]
        return "".join(f"\n--- {log.name} ---\n" + log.read_text(errors="replace")[-4000:]
                       for log in logs if log.exists())

    # ------------------------------------------------------------------ results
    def output_of(self, command: str) -> str:
        """The output of the first command that is ``command`` or starts with it, followed
        by more words (the README's trailing comments do not count)."""
        return next(s.output for s in self.steps
                    if re.sub(r"\s+# .*$", "", s.what) == command
                    or s.what.startswith(command + " "))

    def output_at(self, line: int) -> str:
        """The output of the block at README.md:``line`` (a Python block's)."""
        return next(s.output for s in self.steps if s.line == line)

    def not_run(self) -> list[Step]:
        return [s for s in self.steps if s.outcome not in ("ran", "started",
                                                           "written and loaded")]
