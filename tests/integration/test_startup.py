"""How `bmq` roles start, or refuse to: one writer per data directory, and start-up failures
as one line on stderr with the documented exit code (bmq.startup.ExitCode), with nothing
created on disk. Every case runs the real `bmq` command as a subprocess."""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from hdfs_native import Client

from bmq.startup import ExitCode
from tests.cluster.zookeeper import ZooKeeper
from tests.conftest import BrokerFactory, bmq_command, free_port
from tests.hdfs import MiniHdfs

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 60.0

# Runs the `bmq` command with some modules made unimportable, as if their package were not
# installed: argv[1] is a comma-separated list of module names, the rest is the command line.
BLOCKING_BMQ = ("import sys\n"
                "for name in sys.argv[1].split(','):\n"
                "    sys.modules[name] = None\n"
                "sys.argv[:2] = ['bmq']\n"
                "from bmq.cli import main\n"
                "main()\n")


def _without_dac_override() -> None:
    """For a test run as root: drop the capabilities that let root read and write any
    directory, so file modes bind the child as they bind any user (a no-op otherwise)."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    pr_capbset_drop, cap_dac_override, cap_dac_read_search = 24, 1, 2
    for cap in (cap_dac_override, cap_dac_read_search):
        if libc.prctl(pr_capbset_drop, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def run(command: list[str], cwd: Path, *, as_plain_user: bool = False,
        env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("BMQ_", "AWS_"))} | (env_extra or {})
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL,
                          preexec_fn=_without_dac_override if as_plain_user else None)


def bmq(*args: str, cwd: Path, as_plain_user: bool = False,
        env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run([*bmq_command(), *args], cwd, as_plain_user=as_plain_user, env_extra=env_extra)


def bmq_without(modules: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-c", BLOCKING_BMQ, modules, *args], cwd)


def assert_refused(result: subprocess.CompletedProcess[str], code: ExitCode, line: str) -> None:
    """The process exited with ``code`` and said exactly ``line`` (after "bmq: ") on stderr."""
    assert (result.returncode, result.stderr.splitlines()) == (code, [f"bmq: {line}"]), \
        f"exit {result.returncode}\n--- stderr ---\n{result.stderr}"


@pytest.fixture
def listening_port() -> Iterator[int]:
    """A port another process (this one) listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


# ----------------------------------------------------------------- one writer per directory

def _produce(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True})
    errors: list[KafkaError] = []
    for value in values:
        producer.produce(topic, value.encode(), on_delivery=lambda err, _msg: err and
                         errors.append(err))
    assert producer.flush(30) == 0 and not errors, errors


def _consume_all(bootstrap: str, topic: str, expected: int) -> list[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[str] = []
    try:
        for _ in range(100):
            for message in consumer.consume(1000, timeout=0.5):
                assert message.error() is None, message.error()
                values.append(message.value().decode())
            if len(values) >= expected:
                break
    finally:
        consumer.close()
    return values


def test_a_second_serve_on_a_data_dir_refuses_and_nothing_acknowledged_is_lost(
        broker_factory: BrokerFactory, topic: str, tmp_path: Path) -> None:
    first = broker_factory()
    data_dir = first.data_dir
    _produce(first.bootstrap, topic, [f"before-{i}" for i in range(200)])

    second = bmq("serve", "--data-dir", data_dir, "--listen", f"127.0.0.1:{free_port()}",
                 cwd=tmp_path)
    assert_refused(second, ExitCode.DATA_DIR_LOCKED,
                   f"another bmq process (pid {first.pid}) is using {data_dir}")
    assert first.is_running()
    _produce(first.bootstrap, topic, [f"after-{i}" for i in range(200)])

    # kill -9: the kernel drops the lock with the process; a new server takes the directory.
    first.kill()
    first.start()
    expected = [f"before-{i}" for i in range(200)] + [f"after-{i}" for i in range(200)]
    assert _consume_all(first.bootstrap, topic, len(expected)) == expected
    assert (Path(data_dir) / ".lock").read_text() == f"{first.pid}\n"


# ------------------------------------------------------- start-up failures: one line, a code

@pytest.mark.parametrize("busy", ["kafka", "metrics"])
def test_a_port_in_use_exits_3_before_creating_anything(
        busy: str, listening_port: int, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    kafka_port, metrics_port = ((listening_port, free_port()) if busy == "kafka"
                                else (free_port(), listening_port))
    result = bmq("serve", "--data-dir", str(data_dir), "--listen", f"127.0.0.1:{kafka_port}",
                 "--metrics-port", str(metrics_port), cwd=tmp_path)
    if busy == "kafka":
        line = (f"cannot listen on 127.0.0.1:{kafka_port}: address already in use "
                "(another process listens there)")
    else:
        line = f"cannot serve metrics on 127.0.0.1:{metrics_port}: Address already in use"
    assert_refused(result, ExitCode.ADDRESS_IN_USE, line)
    assert not data_dir.exists()


def test_unusable_data_dirs_exit_4_and_create_nothing(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    result = bmq("serve", "--data-dir", str(a_file), "--listen", f"127.0.0.1:{free_port()}",
                 cwd=tmp_path)
    assert_refused(result, ExitCode.STORAGE,
                   f"data directory {a_file} exists and is not a directory")

    under_a_file = a_file / "data"
    result = bmq("serve", "--data-dir", str(under_a_file), "--listen",
                 f"127.0.0.1:{free_port()}", cwd=tmp_path)
    assert_refused(result, ExitCode.STORAGE,
                   f"cannot create data directory {under_a_file}: {a_file} is not a directory")
    assert a_file.read_text() == "not a directory"

    read_only = tmp_path / "read-only"
    read_only.mkdir(mode=0o500)
    result = bmq("serve", "--data-dir", str(read_only), "--listen", f"127.0.0.1:{free_port()}",
                 cwd=tmp_path, as_plain_user=True)
    assert_refused(result, ExitCode.STORAGE,
                   f"data directory {read_only} is not readable and writable by this user "
                   f"(uid {os.getuid()})")
    assert list(read_only.iterdir()) == []
    result = bmq("serve", "--data-dir", str(read_only / "data"), "--listen",
                 f"127.0.0.1:{free_port()}", cwd=tmp_path, as_plain_user=True)
    assert_refused(result, ExitCode.STORAGE,
                   f"cannot create data directory {read_only / 'data'}: {read_only} is not "
                   f"writable by this user (uid {os.getuid()})")


@pytest.mark.parametrize(("storage", "blocked", "package", "extra"), [
    ("s3://bucket/bmq", "obstore", "obstore", "s3"),
    ("hdfs://127.0.0.1:1/bmq", "hdfs_native", "hdfs_native", "hdfs"),
])
def test_missing_storage_package_names_the_extra(
        storage: str, blocked: str, package: str, extra: str, tmp_path: Path) -> None:
    scheme = storage.split("://")[0]
    result = bmq_without(blocked, "broker", "--zookeeper", "127.0.0.1:1", "--storage", storage,
                         "--listen", f"127.0.0.1:{free_port()}", "--broker-id", "1",
                         cwd=tmp_path)
    assert_refused(result, ExitCode.MISSING_PACKAGE,
                   f"{scheme}:// storage needs the Python package {package}, which is not "
                   f"installed: pip install 'bmq[{extra}]'")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("blocked", ["pyspark", "pyarrow"])
def test_spark_without_its_packages_names_the_extra(blocked: str, tmp_path: Path) -> None:
    code = f"import sys; sys.modules[{blocked!r}] = None; from bmq.spark import BMQDataSource"
    result = run([sys.executable, "-c", code], tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        f"bmq.startup.MissingPackageError: bmq.spark needs the Python package {blocked}, "
        "which is not installed: pip install 'bmq[spark]'"), result.stderr


@pytest.mark.parametrize("blocked", ["pyspark", "pyarrow"])
def test_the_parquet_job_without_spark_says_so_in_one_line(blocked: str, tmp_path: Path) -> None:
    job = ROOT / "spark_jobs" / "export_to_parquet.py"
    code = (f"import sys, runpy; sys.modules[{blocked!r}] = None; "
            f"sys.argv = ['export_to_parquet.py', '--storage', 'file://{tmp_path}', "
            f"'--topic', 't', '--output', '{tmp_path / 'out'}']; "
            f"runpy.run_path({str(job)!r}, run_name='__main__')")
    result = run([sys.executable, "-c", code], tmp_path)
    assert (result.returncode, result.stderr.splitlines()) == (ExitCode.MISSING_PACKAGE, [
        f"export_to_parquet: error: bmq.spark needs the Python package {blocked}, which is "
        "not installed: pip install 'bmq[spark]'"]), result.stderr


def test_the_extras_named_exist() -> None:
    """Each `pip install 'bmq[EXTRA]'` the errors print installs the package they name."""
    from bmq.spark import SPARK_PACKAGES
    from bmq.storage.factory import HDFS_PACKAGES, S3_PACKAGES

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    # (names as pip normalizes them: hdfs-native installs the module hdfs_native)
    installs = {extra: {req.split(">")[0].split("=")[0].split("[")[0].strip().lower()
                        .replace("-", "_") for req in requirements}
                for extra, requirements in extras.items()}
    assert installs["s3"] >= S3_PACKAGES
    assert installs["hdfs"] >= HDFS_PACKAGES
    assert SPARK_PACKAGES - {"py4j"} <= installs["spark"]   # py4j comes with pyspark


def test_unreachable_s3_exits_4(tmp_path: Path) -> None:
    """A broker reaches ZooKeeper, then its S3 endpoint is down: one line after the storage's
    bounded retries (shortened here with retry_timeout_s)."""
    dead = f"http://127.0.0.1:{free_port()}"
    zookeeper = ZooKeeper.start(tmp_path / "zk")
    try:
        result = bmq("broker", "--zookeeper", zookeeper.hosts, "--storage", "s3://bucket/bmq",
                     "--storage-option", f"endpoint_url={dead}", "--storage-option", "key=k",
                     "--storage-option", "secret=s", "--storage-option", "retry_timeout_s=2",
                     "--listen", f"127.0.0.1:{free_port()}", "--broker-id", "1", cwd=tmp_path)
    finally:
        zookeeper.stop()
    assert result.returncode == ExitCode.STORAGE, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("bmq: storage s3://bucket/bmq cannot be used: ") and dead in line


def hdfs_broker(hdfs_url: str, tmp_path: Path, user: str | None = None
                ) -> subprocess.CompletedProcess[str]:
    """``bmq broker`` on ``hdfs_url`` (as HDFS user ``user``: hdfs-native takes
    HADOOP_USER_NAME), with a ZooKeeper of its own; its exit."""
    zookeeper = ZooKeeper.start(tmp_path / "zk")
    try:
        return bmq("broker", "--zookeeper", zookeeper.hosts, "--storage", hdfs_url,
                   "--listen", f"127.0.0.1:{free_port()}", "--broker-id", "1", cwd=tmp_path,
                   env_extra={"HADOOP_USER_NAME": user} if user else None)
    finally:
        zookeeper.stop()


def test_unreachable_namenode_exits_4(tmp_path: Path) -> None:
    """A broker reaches ZooKeeper, then nothing listens at its HDFS NameNode: one line, at once
    (hdfs-native would retry for ever; the NameNode's address is probed first)."""
    namenode = f"127.0.0.1:{free_port()}"
    result = hdfs_broker(f"hdfs://{namenode}/bmq", tmp_path)
    assert_refused(result, ExitCode.STORAGE, f"storage hdfs://{namenode}/bmq cannot be used: "
                   f"NameNode {namenode} unreachable: Connection refused")


def test_an_hdfs_path_without_permission_exits_4(mini_hdfs: MiniHdfs, tmp_path: Path) -> None:
    """The broker's HDFS user may not write where its storage URL points: one line naming
    HDFS's refusal, exit 4, nothing created."""
    client = Client(mini_hdfs.namenode)
    private = f"/private-{tmp_path.name}"
    client.mkdirs(private, 0o700, True)
    url = mini_hdfs.url(f"{private}/bmq")
    result = hdfs_broker(url, tmp_path, user="alice")
    assert_refused(result, ExitCode.STORAGE, f"storage {url} cannot be used: "
                   "AccessControlException: Permission denied: user=alice, access=EXECUTE, "
                   f'inode="{private}":root:supergroup:drwx------')
    assert [s.path for s in client.list_status(private)] == []


def test_an_hdfs_in_safe_mode_exits_4(tmp_path: Path) -> None:
    """The NameNode is in safe mode (read-only): one line with HDFS's reason, exit 4."""
    hdfs = MiniHdfs.start(tmp_path / "hdfs", datanodes=1)
    try:
        hdfs.safe_mode(True)
        url = hdfs.url("bmq")
        result = hdfs_broker(url, tmp_path)
    finally:
        hdfs.stop()
    assert result.returncode == ExitCode.STORAGE, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"bmq: storage {url} cannot be used: SafeModeException: Cannot "
                           "create directory /bmq/topics. Name node is in safe mode."), line


def test_unreachable_zookeeper_exits_7_before_creating_storage(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    zookeeper = f"127.0.0.1:{free_port()}"
    result = bmq("broker", "--zookeeper", zookeeper, "--storage", f"file://{shared}",
                 "--listen", f"127.0.0.1:{free_port()}", "--broker-id", "1", cwd=tmp_path)
    assert_refused(result, ExitCode.ZOOKEEPER, f"cannot reach ZooKeeper {zookeeper} within 15 s")
    assert not shared.exists()


def test_a_proxy_on_a_port_in_use_exits_3_before_touching_zookeeper_or_storage(
        listening_port: int, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    result = bmq("proxy", "--zookeeper", f"127.0.0.1:{free_port()}", "--storage",
                 f"file://{shared}", "--listen", f"127.0.0.1:{listening_port}", cwd=tmp_path)
    assert_refused(result, ExitCode.ADDRESS_IN_USE,
                   f"cannot listen on 127.0.0.1:{listening_port}: address already in use "
                   "(another process listens there)")
    assert not shared.exists()


@pytest.mark.parametrize(("args", "environ", "message"), [
    (["serve", "--listen", "nonsense"], {}, "expected HOST:PORT, got 'nonsense'"),
    (["serve"], {"BMQ_LOG_LEVEL": "LOUD"}, "log_level: Unknown level: 'LOUD'"),
    (["broker", "--zookeeper", "127.0.0.1:1"], {}, "--storage (or BMQ_STORAGE / storage) is "
                                                   "required"),
    (["proxy", "--zookeeper", "127.0.0.1:1", "--storage", "file:///nowhere",
      "--storage-option", "no-equals"], {}, "--storage-option expects KEY=VALUE, got "
                                            "'no-equals'"),
])
def test_a_bad_setting_is_one_line_and_exit_2(args: list[str], environ: dict[str, str],
                                              message: str, tmp_path: Path) -> None:
    result = subprocess.run([*bmq_command(), *args], cwd=tmp_path, capture_output=True,
                            text=True, timeout=RUN_TIMEOUT_S, check=False,
                            env={**os.environ, **environ})
    assert_refused(result, ExitCode.USAGE, message)
    assert "Usage:" not in result.stderr
    assert list(tmp_path.iterdir()) == []
