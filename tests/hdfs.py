"""A throw-away real HDFS for tests and benchmarks: Hadoop's MiniDFSCluster (a NameNode and N
DataNodes in one JVM, ``tools/hdfs``) on 127.0.0.1, each daemon on a port the kernel picks.

``scripts/setup.sh --tests`` fetches Hadoop with Maven and builds the launcher; ``launcher_command``
builds it if that has not been done yet::

    from tests.hdfs import MiniHdfs
    hdfs = MiniHdfs.start(tmp_dir)        # waits until every DataNode has registered
    hdfs.namenode                         # "hdfs://127.0.0.1:PORT"
    hdfs.url("bmq")                       # "hdfs://127.0.0.1:PORT/bmq"
    hdfs.datanodes                        # the DataNodes' transfer addresses
    hdfs.stop_datanode(0)                 # DataNode 0 goes away; the NameNode sees it by heartbeats
    hdfs.stop()
"""

from __future__ import annotations

import contextlib
import json
import selectors
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
HDFS_SCRIPT = REPO / "scripts" / "hdfs.sh"
MAIN_CLASS = "bmq.hdfs.MiniHdfs"
# Seconds for the JVM, the NameNode and every DataNode to come up: about 7 s on an idle 2-core
# machine, several times that while other tests load it.
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 60.0
COMMAND_TIMEOUT_S = 120.0


def launcher_command() -> list[str]:
    """``java -cp ... bmq.hdfs.MiniHdfs`` (building the launcher first if needed: Maven's
    local repository then holds Hadoop's jars, so later builds and runs need no network)."""
    classpath = subprocess.run([str(HDFS_SCRIPT), "classpath"], check=True, text=True,
                               stdout=subprocess.PIPE).stdout.strip()
    return ["java", "-Xmx1g", "-cp", classpath, MAIN_CLASS]


@dataclass
class MiniHdfs:
    """A running MiniDFSCluster; ``info`` is the launcher's last JSON report."""

    proc: subprocess.Popen[str]
    base_dir: Path
    log_path: Path
    info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def start(cls, base_dir: Path, datanodes: int = 3, block_size: int | None = None,
              timeout: float = START_TIMEOUT_S) -> MiniHdfs:
        base_dir.mkdir(parents=True, exist_ok=True)
        log_path = base_dir / "mini-hdfs.log"
        args = [*launcher_command(), "--base-dir", str(base_dir / "data"),
                "--datanodes", str(datanodes), "--port", "0", "--stdin-commands"]
        if block_size:
            args += ["--block-size", str(block_size)]
        with open(log_path, "ab") as log:
            # Its own session: a Ctrl-C of pytest does not reach it before stop() does; and
            # stdin is a pipe whose end (pytest dying) shuts the cluster down.
            proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=log, text=True, start_new_session=True)
        hdfs = cls(proc, base_dir, log_path)
        try:
            hdfs.info = hdfs._answer(timeout, "start")
        except BaseException:
            hdfs.kill()
            raise
        return hdfs

    # ------------------------------------------------------------------ info
    @property
    def namenode(self) -> str:
        return str(self.info["namenode"])

    @property
    def http_address(self) -> str:
        """The NameNode's web address (WebHDFS: http://ADDRESS/webhdfs/v1/...)."""
        return str(self.info["http"])

    @property
    def datanodes(self) -> list[str]:
        return [str(node["xfer"]) for node in self.info["datanodes"]]

    def storage_options(self) -> dict[str, str]:
        """Options for ``open_storage(self.url(...), options)``: the NameNode's web address,
        which readers of a segment another process writes need (``HdfsStorage``)."""
        return {"dfs.namenode.http-address": self.http_address}

    def url(self, path: str = "") -> str:
        return f"{self.namenode}/{path.lstrip('/')}"

    def log_tail(self, chars: int = 4000) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-chars:]
        return ""

    # -------------------------------------------------------------- commands
    def stop_datanode(self, index: int) -> None:
        """Stop DataNode ``index`` (of those running now; the later ones move down one)."""
        self.info = self._command(f"stop-datanode {index}")

    def safe_mode(self, on: bool) -> None:
        """Put the NameNode in safe mode (read-only: every change refused) or take it out."""
        self._command(f"safemode {'enter' if on else 'leave'}")

    def space_quota(self, path: str, size: int | None) -> None:
        """Limit what the files under ``path`` may take (replicas counted), or lift the limit
        (None): past it the NameNode refuses new blocks, as a full HDFS does."""
        self._command(f"space-quota {path} {-1 if size is None else size}")

    def stop_namenode(self) -> None:
        """Stop the NameNode (its port refuses connections); the DataNodes keep running."""
        self._command("stop-namenode")

    def restart_namenode(self) -> None:
        """Start the NameNode again on the same port; returns once the DataNodes are back."""
        self.info = self._command("restart-namenode")

    def restart_datanode(self, index: int) -> None:
        self.info = self._command(f"restart-datanode {index}")

    def _command(self, line: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self._answer(COMMAND_TIMEOUT_S, line)
        if "error" in answer:
            raise RuntimeError(f"mini HDFS: {line}: {answer['error']}")
        return answer

    def _answer(self, timeout: float, what: str) -> dict[str, Any]:
        """The launcher's next line of JSON on stdout."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if selector.select(timeout=0.5):
                    line = self.proc.stdout.readline()
                    if line.strip():
                        answer: dict[str, Any] = json.loads(line)
                        return answer
                    if self.proc.poll() is not None or not line:
                        break
        raise RuntimeError(f"mini HDFS gave no answer to {what} (exit code "
                           f"{self.proc.poll()})\n--- its log ---\n{self.log_tail()}")

    # ------------------------------------------------------------- lifecycle
    def stop(self) -> None:
        """Shut the cluster down cleanly (the JVM's shutdown hook), killing it if it hangs."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                assert self.proc.stdin is not None
                self.proc.stdin.close()          # end of input: the launcher shuts down
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.kill()
        for stream in (self.proc.stdout, self.proc.stdin):
            with contextlib.suppress(OSError, ValueError):
                if stream is not None:
                    stream.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
