"""Scheduled records (README "Scheduled delivery") in the console: per topic with
``bmq.delay.enable=true``, the records held and not delivered yet, per partition, as each
partition's owner counts them (the read-only topic config ``bmq.delay.pending`` that
DescribeConfigs answers, "0:12,1:0": live at the owner, else its last progress write), with
the earliest and latest due time of what each owner holds (``bmq.delay.due``)."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bmq.client.requests import Address
from bmq.console.admin import ClusterAdmin, ConsoleError
from bmq.console.pages import ConsolePages
from bmq.protocol.errors import ErrorCode
from bmq.protocol.messages import DescribeConfigsRequest
from bmq.protocol.messages.describe_configs_request import DescribeConfigsResource

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


def _describe(admin: ClusterAdmin, addresses: list[Address], names: list[str],
              keys: list[str]) -> dict[str, dict[str, list[str | None]]]:
    """The configs ``keys`` of the topics ``names``, asked of each broker of ``addresses``
    in one DescribeConfigs request (confluent-kafka's describe_configs asks a resource at a
    time: 1.3 s for 1,000 topics): by topic, by config, the values the brokers answered."""
    request = DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=name, configuration_keys=keys)
        for name in names])
    found: dict[str, dict[str, list[str | None]]] = {name: {} for name in names}
    for answer in admin.ask([(address, request) for address in addresses],
                            DESCRIBE_CONFIGS_VERSION):
        for result in answer.results if answer is not None else []:
            if result.error_code == ErrorCode.NONE and result.resource_name in found:
                for entry in result.configs:
                    found[result.resource_name].setdefault(entry.name, []).append(entry.value)
    return found


def scheduled_topics(admin: ClusterAdmin) -> list[ScheduledTopic]:
    """Every topic with scheduled delivery on, with its records held per partition (asked of
    one broker, which reads the counts of partitions others own from storage) and by due
    time (asked of every broker, each counting the partitions it owns)."""
    names = [name for name in admin.partition_counts() if not name.startswith("__")]
    addresses = admin.addresses()
    configs = _describe(admin, addresses[:1], names, [ENABLE, PENDING])
    scheduled = sorted(name for name, c in configs.items()
                       if str((c.get(ENABLE) or [None])[0]).lower() == "true")
    due = _describe(admin, addresses, scheduled, [PENDING_DUE]) if scheduled else {}
    topics = []
    for name in scheduled:
        by_due: dict[int, list[int]] = {}
        for value in due[name].get(PENDING_DUE, []):
            for index, counts in _pairs(value).items():
                if len(counts) == len(DUE_BUCKETS):
                    by_due.setdefault(index, counts)
        pending = _pairs((configs[name].get(PENDING) or [None])[0])
        topics.append(ScheduledTopic(name, {i: counts[0] for i, counts in pending.items()},
                                     by_due))
    return topics


def routes(console: ConsolePages) -> list[Route]:
    async def scheduled(request: Request) -> Response:
        try:
            topics = await console._call(scheduled_topics, console.admin)
        except ConsoleError as failure:
            return console.page(request, "scheduled.html", status=503, topics=[],
                                due_buckets=DUE_BUCKETS, error=str(failure))
        return console.page(request, "scheduled.html", topics=topics, due_buckets=DUE_BUCKETS)

    return [Route("/scheduled", scheduled, name="scheduled")]
