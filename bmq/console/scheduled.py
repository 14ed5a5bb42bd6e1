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

if TYPE_CHECKING:
    from bmq.console.app import Console

ENABLE = "bmq.delay.enable"
PENDING = "bmq.delay.pending"


@dataclass(frozen=True)
class ScheduledTopic:
    name: str
    pending: dict[int, int]        # partition -> records held

    @property
    def total(self) -> int:
        return sum(self.pending.values())


def _pairs(text: str | None) -> dict[int, int]:
    """"0:12,1:0" as {0: 12, 1: 0}; what does not parse is left out."""
    found = {}
    for pair in (text or "").split(","):
        index, _, count = pair.partition(":")
        if index.strip().isdigit() and count.strip().lstrip("-").isdigit():
            found[int(index)] = int(count)
    return found


def scheduled_topics(admin: ClusterAdmin) -> list[ScheduledTopic]:
    """Every topic with scheduled delivery on, with its records held per partition."""
    names = [name for name in admin.partition_counts() if not name.startswith("__")]
    configs = admin.configs("TOPIC", names)
    return sorted((ScheduledTopic(name, _pairs(c.get(PENDING)))
                   for name, c in configs.items() if c.get(ENABLE, "").lower() == "true"),
                  key=lambda t: t.name)


def routes(console: Console) -> list[Route]:
    async def scheduled(request: Request) -> Response:
        try:
            topics = await console._call(scheduled_topics, console.admin)
        except ConsoleError as failure:
            return console.page(request, "scheduled.html", status=503, topics=[],
                                error=str(failure))
        return console.page(request, "scheduled.html", topics=topics)

    return [Route("/scheduled", scheduled, name="scheduled")]
