"""What `bmq broker` pays for at start: Python imports are most of its start-up time (a new
broker's share is served within about half a second of it accepting connections), and the
generated Kafka message modules and the API handlers were a large part of those imports."""

from __future__ import annotations

import json
import subprocess
import sys

import click

from bmq.broker.handlers import HANDLERS


def modules_of_bmq_broker() -> list[str]:
    """Modules loaded once `bmq broker` has its command and its server code."""
    code = ("import json, sys, click; from bmq.cli import main; "
            "main.get_command(click.Context(main), 'broker'); import bmq.broker.cluster_server; "
            "print(json.dumps(sorted(sys.modules)))")
    return list(json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                          text=True, check=True, timeout=120).stdout))


def test_broker_imports_messages_and_handlers_on_first_use() -> None:
    """A starting broker lists every API it serves without importing their message modules
    or handlers (they were a quarter of its start-up): only the ones it uses itself."""
    loaded = modules_of_bmq_broker()
    # The APIs' messages; the internal topics' record modules (group_metadata_key, ...) are the
    # broker's own, used by its coordinators from the start.
    messages = [m for m in loaded if m.startswith("bmq.protocol.messages.")
                and m.endswith(("_request", "_response"))]
    assert len(messages) < 15, messages
    handlers = [m for m in loaded if m.startswith("bmq.broker.handlers.")]
    assert handlers == ["bmq.broker.handlers.base"], handlers
    # ... and each is there once it is asked for.
    produce = HANDLERS[0]
    assert produce.name == "Produce" and produce.request_type.__name__ == "ProduceRequest"
    assert produce.handler.__name__ == "handle_produce"
    assert (produce.min_version, produce.max_version) == (produce.request_type.MIN_VERSION,
                                                          produce.request_type.MAX_VERSION)


def test_roles_do_not_import_the_client_commands() -> None:
    loaded = modules_of_bmq_broker()
    assert "bmq.commands" not in loaded and "rich" not in loaded
    assert "bmq.broker.command" in loaded


def test_every_command_is_listed_and_found() -> None:
    from bmq.cli import main
    from bmq.commands import COMMANDS

    ctx = click.Context(main)
    names = main.list_commands(ctx)
    roles = {"serve", "broker", "controller", "admin", "proxy", "local", "mirror", "databus",
             "console"}
    assert {c.name for c in COMMANDS} | roles == set(names)
    for name in names:
        command = main.get_command(ctx, name)
        assert command is not None and command.name == name
