"""The source is stopped for 20 s and started again: the mirror keeps running, reports the
source down meanwhile, and resumes where it was (slow: run with BMQ_SLOW_TESTS=1)."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.conftest import BrokerFactory, bmq_command, make_topic_name
from tests.mirror.conftest import MirrorFactory, wait_until
from tests.mirror.helpers import create, metric, mirrored, produce, records

OUTAGE_S = 20


@pytest.mark.slow
def test_the_mirror_resumes_after_the_source_was_down_20_s(
        broker_factory: BrokerFactory, mirror_factory: MirrorFactory) -> None:
    source = broker_factory()
    target = broker_factory(config={"auto_create_topics_enable": False})
    mirror = mirror_factory(source, target, "--topic-regex", "m-.*")
    topic = make_topic_name("m-outage")
    create(source.bootstrap, topic, 2)
    produce(source.bootstrap, topic, 100, 2)

    def caught_up() -> bool:
        return mirrored(source.bootstrap, target.bootstrap, topic, 2)

    wait_until(caught_up, 20, "mirrored before the outage", mirror.log_text)
    source.stop()
    down_at = time.monotonic()
    wait_until(lambda: metric(mirror.metrics_port, "bmq_mirror_source_up") == 0
               and "unreachable" in mirror.log_text(), 15,
               "the mirror reports the source down", mirror.log_text)
    status = subprocess.run([*bmq_command(), "mirror", "status", "-b", target.bootstrap],
                            capture_output=True, text=True, timeout=30)
    assert status.returncode == 0 and topic in status.stdout, status.stderr
    time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - down_at)))
    assert mirror.proc is not None and mirror.proc.poll() is None, mirror.log_text()
    source.start()
    produce(source.bootstrap, topic, 100, 2, start=100)
    wait_until(caught_up, 30, "mirrored again after the source came back", mirror.log_text)
    assert metric(mirror.metrics_port, "bmq_mirror_source_up") == 1
    assert records(target.bootstrap, topic, 2) == records(source.bootstrap, topic, 2)
