"""Producing one record from the console: key, value, headers and, when chosen, a partition;
the offset the cluster gave it is shown after. A confluent-kafka Producer per record (the page
is a hand's tool, not a stream), acks=all and no retries past its timeout: a refusal (an
oversized record, a view, a partition the topic lacks) is shown as the cluster gave it and
nothing is written."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bmq.console.admin import REQUEST_TIMEOUT_S, ClusterAdmin, ConsoleError
from bmq.console.messages import parse_number
from bmq.console.pages import ConsolePages
from bmq.console.topic_forms import post_topic_form


@dataclass(frozen=True)
class Produced:
    partition: int
    offset: int


def parse_headers(text: str) -> list[tuple[str, str | bytes | None]]:
    """``NAME=VALUE`` lines (blank lines skipped); the value is everything after the first
    ``=``, so it may hold ``=`` itself."""
    headers: list[tuple[str, str | bytes | None]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise ConsoleError(f"header line {number} must be NAME=VALUE, got {line.strip()!r}")
        headers.append((name.strip(), value.encode()))
    return headers


def produce(admin: ClusterAdmin, topic: str, form: Mapping[str, str]) -> Produced:
    """Sends the form's record to ``topic`` and waits for its offset."""
    partition = parse_number(form.get("partition"), "partition", -1)
    headers = parse_headers(form.get("headers", ""))
    key = form.get("key") or None
    known = admin.topic(topic)        # an unknown topic is refused, not auto-created
    if partition >= len(known.partitions):
        raise ConsoleError(f"{topic} has no partition {partition} "
                           f"(it has {len(known.partitions)})")
    producer = Producer({**admin.client_config, "acks": "all",
                         "message.timeout.ms": int(REQUEST_TIMEOUT_S * 1000)})
    outcome: list[tuple[KafkaError | None, Message]] = []
    try:
        producer.produce(topic, value=form.get("value", "").encode(), key=key,
                         headers=headers, partition=partition,
                         on_delivery=lambda error, message: outcome.append((error, message)))
        producer.flush(REQUEST_TIMEOUT_S + 1)
    except (KafkaException, BufferError) as error:
        reason = error.args[0].str() if isinstance(error, KafkaException) else str(error)
        raise ConsoleError(f"cannot produce to {topic}: {reason}") from error
    if not outcome:
        raise ConsoleError(f"cannot produce to {topic}: no answer within "
                           f"{REQUEST_TIMEOUT_S:g} s")
    refused, message = outcome[0]
    if refused is not None:
        raise ConsoleError(f"cannot produce to {topic}: {refused.str()}")
    return Produced(message.partition() or 0, message.offset() or 0)


def routes(console: ConsolePages) -> list[Route]:
    async def produce_page(request: Request, error: str | None = None,
                           entered: Mapping[str, str] | None = None) -> Response:
        name = request.path_params["name"]
        try:
            topic = await console._call(console.admin.topic, name)
        except ConsoleError as failure:
            return console.page(request, "produce.html", status=404, name=name, topic=None,
                                error=str(failure))
        return console.page(request, "produce.html", status=400 if error else 200,
                            name=name, topic=topic, error=error, entered=dict(entered or {}),
                            produced=request.query_params)

    async def produce_record(request: Request) -> Response:
        async def send(name: str, form: dict[str, str]) -> Response:
            done = await console._call(produce, console.admin, name, form)
            target = request.url_for("produce", name=name).include_query_params(
                partition=done.partition, offset=done.offset)
            return console._back(target, f"produced to {name}[{done.partition}] at offset "
                                         f"{done.offset}")

        return await post_topic_form(console, request, send, produce_page)

    return [
        Route("/topics/{name}/produce", produce_page, name="produce"),
        Route("/topics/{name}/produce", produce_record, methods=["POST"],
              name="produce_record"),
    ]
