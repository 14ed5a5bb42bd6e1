"""A share group's dead-letter topic (KIP-1191) in the console: its records with the reasons
the broker wrote in their ``bmq.dlq.*`` headers (bmq.coordinators.share.dlq) as columns, and
the redrive: selected records, or every record of an offset range, produced back to the topic
and partition they came from by an idempotent producer (acks=all), with their key, value and
own headers (the ``bmq.dlq.*`` ones dropped).

Kafka cannot delete one record, so redriven records stay in the dead-letter topic. What was
redriven is kept where `bmq dlq redrive` keeps it: the committed offset of the consumer group
``bmq-dlq-redrive-TOPIC`` (the redrive position). A range redrive that starts at or before
that position moves it to the range's end, so the page marks those records redriven and a
later `bmq dlq redrive` skips them; a redrive of selected records leaves it where it is."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, Producer
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bmq.console.admin import ClusterAdmin, ConsoleError, PartitionOffsets
from bmq.console.messages import MAX_PAGE, Message, parse_number, read_page
from bmq.console.pages import ConsolePages
from bmq.coordinators.share.dlq import (
    DEAD_LETTER_ENABLE,
    HEADER_PREFIX,
    PARTITION_HEADER,
    TOPIC_HEADER,
)

# The reasons shown as columns (header name without its prefix, column title), in the order
# the broker writes them.
REASONS = (("topic", "from topic"), ("partition", "from partition"), ("offset", "from offset"),
           ("group", "group"), ("delivery.count", "deliveries"), ("reason", "reason"))
# Records one redrive of a range sends at most (ten pages of the browser).
MAX_REDRIVE = 10 * MAX_PAGE
FLUSH_TIMEOUT_S = 30.0


def redrive_group(topic: str) -> str:
    """The consumer group whose committed offsets are the redrive position (the one `bmq dlq
    redrive` uses by default)."""
    return f"bmq-dlq-redrive-{topic}"


@dataclass(frozen=True)
class DeadLetter:
    message: Message

    @property
    def reasons(self) -> dict[str, str]:
        """The ``bmq.dlq.*`` headers, by name without the prefix."""
        return {name[len(HEADER_PREFIX):]: (value or b"").decode("utf-8", "replace")
                for name, value in self.message.headers if name.startswith(HEADER_PREFIX)}

    @property
    def own_headers(self) -> list[tuple[str, str | bytes | None]]:
        return [(name, value) for name, value in self.message.headers
                if not name.startswith(HEADER_PREFIX)]

    def source(self, known: dict[str, int]) -> tuple[str, int] | None:
        """The topic and partition it goes back to (-1: the topic's partitioner, when that
        partition is gone); None when it names no topic the cluster has."""
        headers = dict(self.message.headers)
        topic = (headers.get(TOPIC_HEADER) or b"").decode("utf-8", "replace")
        if topic not in known:
            return None
        index = (headers.get(PARTITION_HEADER) or b"").decode()
        return topic, int(index) if index.isdigit() and int(index) < known[topic] else -1


@dataclass(frozen=True)
class Redriven:
    sent: Counter[str]       # "topic[partition]" -> records
    skipped: int             # records naming no topic the cluster has
    position: int | None     # the redrive position after it, when it moved


def dead_letter_partition(admin: ClusterAdmin, topic: str, partition: int) -> PartitionOffsets:
    """The partition of a dead-letter topic; ConsoleError for a topic that is none (KIP-1191's
    ``errors.deadletterqueue.group.enable`` is not true) or a partition it does not have."""
    summary = admin.topic(topic)
    if admin.configs("TOPIC", [topic])[topic].get(DEAD_LETTER_ENABLE, "").lower() != "true":
        raise ConsoleError(f"{topic} is not a dead-letter topic ({DEAD_LETTER_ENABLE} is not "
                           "true on it): nothing is shown or redriven from it")
    chosen = next((p for p in summary.partitions if p.partition == partition), None)
    if chosen is None:
        raise ConsoleError(f"{topic} has no partition {partition} "
                           f"(it has {len(summary.partitions)})")
    return chosen


def redrive_position(admin: ClusterAdmin, topic: str, partition: int) -> int | None:
    committed = admin.committed_offsets(redrive_group(topic))
    return next((tp.offset for tp in committed
                 if tp.topic == topic and tp.partition == partition and tp.offset >= 0), None)


def redrive(admin: ClusterAdmin, topic: str, partition: int, start: int, end: int,
            selected: set[int] | None) -> Redriven:
    """Produces the records of ``topic[partition]`` in [start, end) (only the ``selected``
    offsets, when given) back to their sources and waits until every one is acknowledged;
    moves the redrive position for a range that starts at or before it. ConsoleError,
    having sent nothing, when there is no record to send."""
    chosen = dead_letter_partition(admin, topic, partition)
    start, end = max(start, chosen.start), min(end, chosen.end)
    if end - start > MAX_REDRIVE:
        raise ConsoleError(f"redrive at most {MAX_REDRIVE:,} records at a time, not "
                           f"{end - start:,}")
    letters: list[DeadLetter] = []
    while start < end:
        page = read_page(admin.client_config, topic, partition, start, end, MAX_PAGE)
        if not page:
            break
        letters += [DeadLetter(m) for m in page if selected is None or m.offset in selected]
        start = page[-1].offset + 1
    if not letters:
        raise ConsoleError(f"no records to redrive in {topic}[{partition}] "
                           f"{'at the offsets selected' if selected else 'in that range'}: "
                           "nothing was sent")
    sent = _produce(admin, letters)
    moved = None
    if selected is None:
        position = redrive_position(admin, topic, partition)
        first = letters[0].message.offset
        if first <= (position if position is not None else chosen.start):
            moved = max(end, position or 0)
            admin.set_group_offsets(redrive_group(topic), {(topic, partition): moved})
    return Redriven(sent, len(letters) - sum(sent.values()), moved)


def _produce(admin: ClusterAdmin, letters: list[DeadLetter]) -> Counter[str]:
    """Each letter to its source, idempotently (a retried send is written once); the count
    sent per topic[partition] once all are acknowledged, ConsoleError if one was not."""
    metadata = admin.partition_counts()
    producer = Producer({**admin.client_config, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
    failures: list[str] = []

    def delivered(error: Any, _record: Any) -> None:
        if error is not None:
            failures.append(error.str())

    sent: Counter[str] = Counter()
    try:
        for letter in letters:
            source = letter.source(metadata)
            if source is None:
                continue
            topic, index = source
            producer.produce(topic, key=letter.message.key, value=letter.message.value,
                             headers=letter.own_headers, partition=index, on_delivery=delivered)
            producer.poll(0)
            sent[f"{topic}[{index}]" if index >= 0 else topic] += 1
        if producer.flush(FLUSH_TIMEOUT_S) or failures:
            raise ConsoleError("redrive failed: " + ("; ".join(failures[:3]) or "records not "
                               f"acknowledged within {FLUSH_TIMEOUT_S:g} s") +
                               " (records acknowledged before are in their topics)")
    except KafkaException as error:
        raise ConsoleError(f"redrive failed: {error.args[0].str()}") from error
    return sent


def _describe(result: Redriven, topic: str, partition: int) -> str:
    where = ", ".join(f"{count} to {target}" for target, count in sorted(result.sent.items()))
    text = f"redrove {sum(result.sent.values())} record(s) of {topic}[{partition}]: {where}"
    if result.skipped:
        text += f"; skipped {result.skipped} naming no topic of the cluster"
    if result.position is not None:
        text += f"; redrive position now {result.position}"
    return text


def routes(console: ConsolePages) -> list[Route]:
    async def browse(request: Request, error: str | None = None) -> Response:
        topic = request.path_params["topic"]
        query = request.query_params
        context: dict[str, Any] = {"topic": topic, "chosen": None, "letters": [],
                                   "reasons": REASONS, "query": dict(query), "position": None,
                                   "group": redrive_group(topic)}
        try:
            partition = parse_number(query.get("partition"), "partition", 0)
            chosen = context["chosen"] = await console._call(
                dead_letter_partition, console.admin, topic, partition)
            offset = parse_number(query.get("offset"), "offset", chosen.start)
            count = parse_number(query.get("count"), "count", 100, 1, MAX_PAGE)
            page = await console._call(read_page, console.admin.client_config, topic,
                                       partition, max(offset, chosen.start), chosen.end, count)
            context["letters"] = [DeadLetter(m) for m in page]
            context["position"] = await console._call(redrive_position, console.admin, topic,
                                                      partition)
        except ConsoleError as failure:
            status = 404 if context["chosen"] is None else 400
            return console.page(request, "dead_letters.html", status=status,
                                error=str(failure), **context)
        return console.page(request, "dead_letters.html", status=400 if error else 200,
                            error=error, **context)

    async def redrive_records(request: Request) -> Response:
        topic = request.path_params["topic"]
        form = await console._form(request)
        if form is None:
            return console._refused(request)
        multi = await request.form()
        try:
            partition = parse_number(form.get("partition"), "partition", 0)
            if form.get("action") == "selected":
                offsets = {parse_number(o, "offset", 0) for o in multi.getlist("offset")
                           if isinstance(o, str)}
                if not offsets:
                    raise ConsoleError("select the records to redrive: nothing was sent")
                start, end, selected = min(offsets), max(offsets) + 1, offsets
            else:
                start = parse_number(form.get("from"), "from offset", -1)
                end = parse_number(form.get("to"), "to offset", -1)
                if start < 0 or end < 0:
                    raise ConsoleError("type the range's first offset and the offset after "
                                       "its last: nothing was sent")
                if end <= start:
                    raise ConsoleError(f"the range {start} to {end} is empty: nothing was sent")
                selected = None
            result = await console._call(redrive, console.admin, topic, partition, start, end,
                                         selected)
        except ConsoleError as failure:
            return await browse(request, str(failure))
        return console._back(request.url_for("dead_letters", topic=topic).include_query_params(
            partition=partition), _describe(result, topic, partition))

    return [Route("/dead-letters/{topic}", browse, name="dead_letters"),
            Route("/dead-letters/{topic}/redrive", redrive_records, methods=["POST"],
                  name="redrive")]
