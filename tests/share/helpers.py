"""Helpers of the share group tests: group configs, producing, share consumers in processes."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from tests.groups.helpers import create_topic, unique

__all__ = ["ShareWorker", "create_dead_letter_topic", "create_topic", "produce",
           "set_group_configs", "unique", "wait_for"]

WORKER = Path(__file__).with_name("worker.py")
# Fewer share-state partitions than the default 50: a quicker first ShareFetch.
SHARE_ENV = {"BMQ_SHARE_COORDINATOR_STATE_TOPIC_NUM_PARTITIONS": "3"}


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs SET on the GROUP resource, as kafka-configs.sh does."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(15)


def create_dead_letter_topic(bootstrap: str, name: str, enabled: bool = True) -> None:
    """A one-partition topic; ``enabled``: with KIP-1191's errors.deadletterqueue.group.enable,
    which lets share groups write dead letters to it."""
    configs = {"errors.deadletterqueue.group.enable": "true"} if enabled else {}
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1, config=configs)],
                        operation_timeout=15, request_timeout=15)[name].result(15)


def produce(bootstrap: str, topic: str, count: int, start: int = 0,
            gap_s: float = 0.0) -> None:
    """``count`` records into partition 0, values ``v<i>``; with ``gap_s``, one at a time."""
    producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                         "linger.ms": 0 if gap_s else 5})
    for i in range(start, start + count):
        producer.produce(topic, value=f"v{i}".encode(), partition=0)
        if gap_s:
            producer.flush(10)
            time.sleep(gap_s)
    assert producer.flush(30) == 0


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class ShareWorker:
    """A ShareConsumer in its own process (worker.py), its events collected as they come."""

    def __init__(self, bootstrap: str, group: str, topic: str, ack: str = "accept",
                 hold: int | None = None) -> None:
        args = [sys.executable, str(WORKER), bootstrap, group, topic, ack]
        if hold is not None:
            args.append(str(hold))
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        self.got: list[tuple[int, int, float]] = []      # offset, delivery count, when
        self.acked: list[int] = []
        self.holding: list[int] = []
        self.held_at = 0.0
        self.ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            word, *rest = line.split()
            numbers = [int(n) for n in rest]
            if word == "ready":
                self.ready.set()
            elif word == "got":
                self.got.append((numbers[0], numbers[1], time.monotonic()))
            elif word == "acked":
                self.acked += numbers
            elif word == "holding":
                self.held_at = time.monotonic()
                self.holding += numbers

    def offsets(self) -> list[int]:
        return [offset for offset, _, _ in self.got]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
