"""Scheduled records (README "Scheduled delivery") in the console: per topic with
``bmq.delay.enable=true``, the records held and not delivered yet, per partition, as each
partition's owner counts them (the read-only topic config ``bmq.delay.pending`` that
DescribeConfigs answers, "0:12,1:0": live at the owner, else its last progress write), with
the earliest and latest due time of what each owner holds (``bmq.delay.due``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bmq.console.admin import ClusterAdmin, ConsoleError
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import DescribeConfigsRequest
from bmq.protocol.messages.describe_configs_request import DescribeConfigsResource

if TYPE_CHECKING:
    from bmq.console.app import Console

ENABLE = "bmq.delay.enable"
PENDING = "bmq.delay.pending"
PENDING_DUE = "bmq.delay.pending.due"
DUE_BUCKETS = ("within 1 min", "1-10 min", "10 min-1 h", "1 h-1 day", "later")
DESCRIBE_CONFIGS_VERSION = 4
TOPIC_RESOURCE = 2


@dataclass(frozen=True)
class ScheduledTopic:
    name: str
    pending: dict[int, int]        # partition -> records held
    # partition -> records held by due time (DUE_BUCKETS); a partition whose owner did not
    # answer is missing
    by_due: dict[int, list[int]]

    @property
    def total(self) -> int:
        return sum(self.pending.values())

    @property
    def total_by_due(self) -> list[int]:
        return [sum(counts[i] for counts in self.by_due.values())
                for i in range(len(DUE_BUCKETS))]


def _pairs(text: str | None) -> dict[int, list[int]]:
    """"0:12,1:0" as {0: [12], 1: [0]}, "0:1/2" as {0: [1, 2]}; what does not parse is
    left out."""
    found = {}
    for pair in (text or "").split(","):
        index, _, counts = pair.partition(":")
        numbers = counts.split("/")
        if index.strip().isdigit() and all(n.strip().isdigit() for n in numbers):
            found[int(index)] = [int(n) for n in numbers]
    return found


def _by_due(admin: ClusterAdmin, names: list[str]) -> dict[str, dict[int, list[int]]]:
    """Each topic's partitions' records held by due time, as their owners count them."""
    request = DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=name, configuration_keys=[PENDING_DUE])
        for name in names])
    found: dict[str, dict[int, list[int]]] = {name: {} for name in names}
    for answer in admin.ask([(address, request) for address in admin.addresses()],
                            DESCRIBE_CONFIGS_VERSION):
        for result in answer.results if answer is not None else []:
            if result.error_code == ErrorCode.NONE and result.resource_name in found:
                for entry in result.configs:
                    for index, counts in _pairs(entry.value).items():
                        if len(counts) == len(DUE_BUCKETS):
                            found[result.resource_name].setdefault(index, counts)
    return found


def scheduled_topics(admin: ClusterAdmin) -> list[ScheduledTopic]:
    """Every topic with scheduled delivery on, with its records held per partition."""
    names = [name for name in admin.partition_counts() if not name.startswith("__")]
    configs = admin.configs("TOPIC", names)
    scheduled = sorted(name for name, c in configs.items()
                       if c.get(ENABLE, "").lower() == "true")
    due = _by_due(admin, scheduled) if scheduled else {}
    return [ScheduledTopic(name, {index: counts[0] for index, counts in
                                  _pairs(configs[name].get(PENDING)).items()}, due[name])
            for name in scheduled]


def routes(console: Console) -> list[Route]:
    async def scheduled(request: Request) -> Response:
        try:
            topics = await console._call(scheduled_topics, console.admin)
        except ConsoleError as failure:
            return console.page(request, "scheduled.html", status=503, topics=[],
                                due_buckets=DUE_BUCKETS, error=str(failure))
        return console.page(request, "scheduled.html", topics=topics, due_buckets=DUE_BUCKETS)

    return [Route("/scheduled", scheduled, name="scheduled")]
