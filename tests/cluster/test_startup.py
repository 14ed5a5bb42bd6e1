"""What `bmq broker` pays for at start: Python imports are most of its start-up time (a new
broker's share is served within about half a second of it accepting connections), and the
generated Kafka message modules were most of those imports."""

from __future__ import annotations

import json
import subprocess
import sys

import click

from bmq.broker.handlers import HANDLERS


def modules_of_bmq_broker() -> list[str]:
    """Modules loaded once `bmq broker` has its command and its server code."""
    code = ("import json, sys, click; from bmq.cli import main; "
            "main.get_command(click.Context(main), 'broker'); import bmq.cluster.server; "
            "print(json.dumps(sorted(sys.modules)))")
    return list(json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                          text=True, check=True, timeout=120).stdout))


def test_broker_imports_only_the_messages_it_serves() -> None:
    loaded = [m for m in modules_of_bmq_broker() if m.startswith("bmq.protocol.messages.")]
    served = {spec.request_type.__module__ for spec in HANDLERS.values()}
    assert served <= set(loaded)
    # Nothing of the APIs no broker serves (KRaft, ACLs, transactions, ...).
    for unused in ("elect_leaders_request", "create_acls_response", "end_txn_request",
                   "describe_quorum_response"):
        assert f"bmq.protocol.messages.{unused}" not in loaded
    assert len(loaded) < 70, len(loaded)


def test_roles_do_not_import_the_client_tools() -> None:
    loaded = modules_of_bmq_broker()
    assert "bmq.tools" not in loaded and "rich" not in loaded
    assert "bmq.cluster.commands" in loaded


def test_every_command_is_listed_and_found() -> None:
    from bmq.cli import main
    from bmq.cluster.commands import COMMANDS as CLUSTER
    from bmq.tools import COMMANDS as TOOLS

    ctx = click.Context(main)
    names = main.list_commands(ctx)
    assert {c.name for c in [*TOOLS, *CLUSTER]} | {"serve", "proxy"} == set(names)
    for name in names:
        command = main.get_command(ctx, name)
        assert command is not None and command.name == name
