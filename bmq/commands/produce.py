"""`bmq produce TOPIC`: one message per line of standard input, acks=all."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, BinaryIO

import click

from bmq.commands.common import (
    Connection,
    connection_options,
    counted,
    fail,
    parse_key_values,
    say,
)


class _Deliveries:
    __slots__ = ("delivered", "failed", "first_error")

    def __init__(self) -> None:
        self.delivered = 0
        self.failed = 0
        self.first_error = ""

    def __call__(self, error: Any, message: Any) -> None:
        if error is None:
            self.delivered += 1
        else:
            self.failed += 1
            if not self.first_error:
                self.first_error = f"{error.name()}: {error.str()}"


@click.command()
@click.argument("topic")
@click.option("-K", "--key-separator", metavar="SEP",
              help="Split each line at the first SEP into key and value (lines without SEP "
                   "are rejected).")
@click.option("-H", "--header", "headers", multiple=True, metavar="KEY=VALUE",
              help="Header added to every message (repeatable).")
@click.option("-p", "--partition", type=int, help="Produce to this partition [partitioner].")
@click.option("-f", "--file", "source", type=click.File("rb"), default="-",
              help="Read lines from this file [standard input].")
@connection_options
def produce(conn: Connection, topic: str, key_separator: str | None, headers: Sequence[str],
            partition: int | None, source: BinaryIO) -> None:
    """Produce each line of standard input to TOPIC as one message.

    Messages are sent with acks=all and idempotence, so each is acknowledged only once it is
    durable. The exit status is 1 if any message was not delivered.

    \b
    Examples:
      echo hello | bmq produce demo
      printf 'user1:clicked\\nuser2:paid\\n' | bmq produce demo -K : -H source=web
      bmq produce demo -p 0 -f events.txt
    """
    from confluent_kafka import KafkaException, Producer

    header_list = list(parse_key_values(headers, "--header").items())
    separator = key_separator.encode() if key_separator else None
    if key_separator == "":
        raise click.BadParameter("must not be empty", param_hint="--key-separator")
    if partition is not None:
        partitions = conn.topic_partitions(topic)
        if partition not in partitions:
            fail(f"topic {topic} has no partition {partition} (it has {len(partitions)})")
    else:
        conn.metadata()  # fail early (exit 3) if the cluster is unreachable
    deliveries = _Deliveries()
    producer = Producer(conn.client_config(**{
        "acks": "all", "enable.idempotence": True, "linger.ms": 5,
        "message.timeout.ms": max(5000, conn.timeout_ms * 3), "on_delivery": deliveries}))
    rejected = 0
    extra: dict[str, Any] = {}
    if partition is not None:
        extra["partition"] = partition
    if header_list:
        extra["headers"] = header_list
    for number, raw in enumerate(source, 1):
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if line.endswith(b"\r"):
            line = line[:-1]
        key = None
        if separator is not None:
            key, found, value = line.partition(separator)
            if not found:
                rejected += 1
                say(f"line {number}: no key separator {key_separator!r}; skipped")
                continue
        else:
            value = line
        while True:
            try:
                producer.produce(topic, value, key, **extra)
                break
            except BufferError:  # local queue full: let deliveries drain it
                producer.poll(0.1)
            except KafkaException as exc:
                fail(f"cannot produce to {topic}: {exc}")
        producer.poll(0)
    remaining = producer.flush(max(5.0, conn.timeout * 3))
    failed = deliveries.failed + remaining
    say(f"{counted(deliveries.delivered, 'message')} produced to {topic}"
        + (f", {failed} failed" if failed else "")
        + (f", {counted(rejected, 'line')} rejected" if rejected else ""))
    if failed:
        fail(f"{counted(failed, 'message')} not delivered"
             + (f" (first error: {deliveries.first_error})" if deliveries.first_error else ""))
    if rejected:
        sys.exit(1)
