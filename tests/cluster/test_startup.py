"""What `bmq broker` pays for at start: Python imports are most of its start-up time (a new
broker's share is served within about half a second of it accepting connections), and the
generated Kafka message modules were most of those imports."""

from __future__ import annotations

import json
import subprocess
import sys

from bmq.broker.handlers import HANDLERS


def test_broker_imports_only_the_messages_it_serves() -> None:
    code = ("import json, sys, bmq.cli, bmq.cluster.server; print(json.dumps(sorted("
            "m for m in sys.modules if m.startswith('bmq.protocol.messages.'))))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                       text=True, check=True, timeout=120).stdout)
    served = {spec.request_type.__module__ for spec in HANDLERS.values()}
    assert served <= set(loaded)
    # Nothing of the APIs no broker serves (KRaft, ACLs, transactions, ...).
    for unused in ("elect_leaders_request", "create_acls_response", "end_txn_request",
                   "describe_quorum_response"):
        assert f"bmq.protocol.messages.{unused}" not in loaded
    assert len(loaded) < 70, len(loaded)
