"""`bmq consume TOPIC`: print messages, one formatted line each."""

from __future__ import annotations

import signal
import sys
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import click

from bmq.commands.common import Connection, connection_options, counted, fail, say

#: Placeholders of --format (Python format syntax, so {offset:>8} works too).
PLACEHOLDERS = {
    "key": "message key (UTF-8; empty when null)",
    "value": "message value (UTF-8; empty when null)",
    "topic": "topic name",
    "partition": "partition number",
    "offset": "offset",
    "timestamp": "timestamp, milliseconds since the epoch",
    "time": "timestamp as ISO 8601 UTC",
    "headers": "headers as k=v,k2=v2",
}
DEFAULT_FORMAT = "{value}"


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    if isinstance(data, str):
        return data
    return data.decode("utf-8", errors="replace")


def _unescape(fmt: str) -> str:
    return fmt.replace("\\t", "\t").replace("\\n", "\n").replace("\\r", "\r")


def fields_of(message: Any) -> dict[str, Any]:
    _kind, timestamp = message.timestamp()
    headers = message.headers() or []
    iso = ""
    if timestamp is not None and timestamp >= 0:
        iso = datetime.fromtimestamp(timestamp / 1000, UTC).isoformat(timespec="milliseconds")
    return {
        "key": _text(message.key()),
        "value": _text(message.value()),
        "topic": message.topic(),
        "partition": message.partition(),
        "offset": message.offset(),
        "timestamp": timestamp,
        "time": iso,
        "headers": ",".join(f"{k}={_text(v)}" for k, v in headers),
    }


def check_format(fmt: str) -> str:
    sample: dict[str, Any] = dict.fromkeys(PLACEHOLDERS, "")
    sample.update(partition=0, offset=0, timestamp=0)
    try:
        fmt.format_map(sample)
    except KeyError as exc:
        raise click.BadParameter(f"unknown placeholder {{{exc.args[0]}}}; use "
                                 + " ".join(f"{{{p}}}" for p in PLACEHOLDERS),
                                 param_hint="--format") from None
    except (ValueError, IndexError) as exc:
        raise click.BadParameter(str(exc), param_hint="--format") from None
    return fmt


FORMAT_HELP = ("Output line for each message, with placeholders "
               + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
               + r"; \t and \n are tab and newline. [{value}]")


@click.command()
@click.argument("topic")
@click.option("-g", "--group", help="Consume as a member of this consumer group, committing "
                                    "what was printed [no group, nothing committed].")
@click.option("--from-beginning", is_flag=True,
              help="Start at the earliest offset (with --group: where the group has no "
                   "committed offset) [the end: only new messages].")
@click.option("-p", "--partition", "partitions", type=int, multiple=True,
              help="Only these partitions (repeatable) [all].")
@click.option("-F", "--format", "fmt", default=DEFAULT_FORMAT, help=FORMAT_HELP)
@click.option("-n", "--max-messages", type=int, help="Exit after this many messages.")
@click.option("--isolation-level", type=click.Choice(["read_committed", "read_uncommitted"]),
              default="read_committed", show_default=True,
              help="read_committed: committed transactions only (the client library's "
                   "default); read_uncommitted: aborted and open transactions too.")
@click.option("-e", "--exit-at-end", is_flag=True,
              help="Exit once every assigned partition has been read to its end.")
@connection_options
def consume(conn: Connection, topic: str, group: str | None, from_beginning: bool,
            partitions: Sequence[int], fmt: str, max_messages: int | None,
            isolation_level: str, exit_at_end: bool) -> None:
    """Print the messages of TOPIC, one line each, until -n, --exit-at-end or Ctrl-C.

    \b
    Examples:
      bmq consume demo --from-beginning --exit-at-end
      bmq consume demo -g billing -n 10 -F '{partition}:{offset} {key}={value}'
      bmq consume demo --from-beginning -e -F '{time}\\t{headers}\\t{value}'
    """
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, TopicPartition

    fmt = check_format(_unescape(fmt))
    if max_messages is not None and max_messages < 0:
        raise click.BadParameter("must be 0 or more", param_hint="-n")
    existing = conn.topic_partitions(topic)
    for p in partitions:
        if p not in existing:
            fail(f"topic {topic} has no partition {p} (it has {len(existing)})")
    consumer = Consumer(conn.client_config(**{
        "group.id": group or f"bmq-cli-{uuid.uuid4().hex[:12]}",
        "enable.auto.commit": group is not None,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest" if from_beginning else "latest",
        "enable.partition.eof": True,
        "allow.auto.create.topics": False,
        "isolation.level": isolation_level,
    }))
    stopping = []
    previous = signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    start = OFFSET_BEGINNING if from_beginning else OFFSET_END
    if group is not None and not partitions:
        consumer.subscribe([topic])
    elif group is not None:
        consumer.assign([TopicPartition(topic, p) for p in partitions])  # committed offsets
    else:
        consumer.assign([TopicPartition(topic, p, start) for p in (partitions or existing)])
    count = 0
    at_end: set[int] = set()
    out = sys.stdout
    interactive = out.isatty()
    try:
        while not stopping and (max_messages is None or count < max_messages):
            message = consumer.poll(0.2)
            if message is None:
                if exit_at_end and _all_at_end(consumer, at_end):
                    break
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition() or 0)
                    if exit_at_end and _all_at_end(consumer, at_end):
                        break
                    continue
                if error.fatal() or error.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART,
                                                     KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                                     KafkaError.GROUP_AUTHORIZATION_FAILED):
                    fail(f"consuming {topic}: {error.name()}: {error.str()}")
                say(f"warning: {error.name()}: {error.str()}")
                continue
            at_end.discard(message.partition())
            out.write(fmt.format_map(fields_of(message)) + "\n")
            if interactive:
                out.flush()
            if group is not None:
                consumer.store_offsets(message)
            count += 1
        out.flush()
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:  # `bmq consume ... | head`: the reader is gone, stop quietly
        sys.stdout = None
    finally:
        signal.signal(signal.SIGTERM, previous)
        _close(consumer, group is not None and count > 0)
    say(f"{counted(count, 'message')} consumed from {topic}"
        + (f" as group {group}" if group else ""))


def _all_at_end(consumer: Any, at_end: set[int]) -> bool:
    assigned = {tp.partition for tp in consumer.assignment()}
    return bool(assigned) and assigned <= at_end


def _close(consumer: Any, commit: bool) -> None:
    from confluent_kafka import KafkaError, KafkaException

    if commit:
        try:
            consumer.commit(asynchronous=False)
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() != KafkaError._NO_OFFSET:  # everything stored was committed already
                say(f"warning: final commit failed: {error.name()}: {error.str()}")
    consumer.close()
