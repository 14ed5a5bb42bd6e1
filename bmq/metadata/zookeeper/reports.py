"""A broker's reports of its partitions' states, in the compact form its registration carries.

A report is ``[epoch, state]``, or ``[epoch, "fenced", epoch found on storage]``. The broker
keeps them by ``"<topic>/<partition>"``; its registration groups them by topic and by report,
with each group's partitions as ranges::

    {"orders": [[3, "writable", "0-41,43-99"], [4, "recovering", "42"]]}

Why: one entry a partition (``{"orders/42": [4, "recovering"]}``) made a registration of 33,000
partitions about 1 MB, ZooKeeper's default limit for a node (``jute.maxbuffer``); past it the
broker could not report, and its partitions never became writable. Grouped, partitions that share
an epoch and a state (most of them: all the partitions given in one pass) take a few bytes a
topic.
"""

from __future__ import annotations

from typing import Any

Report = list[Any]


def _ranges(partitions: list[int]) -> str:
    spans: list[str] = []
    start = prev = partitions[0]
    for p in partitions[1:]:
        if p != prev + 1:
            spans.append(f"{start}-{prev}" if prev > start else str(start))
            start = p
        prev = p
    spans.append(f"{start}-{prev}" if prev > start else str(start))
    return ",".join(spans)


def _partitions(ranges: str) -> list[int]:
    found: list[int] = []
    for span in ranges.split(","):
        first, _, last = span.partition("-")
        found.extend(range(int(first), int(last or first) + 1))
    return found


def encode(reports: dict[str, Report]) -> dict[str, list[list[Any]]]:
    """``{"<topic>/<p>": report}`` -> the registration's form."""
    grouped: dict[str, dict[tuple[Any, ...], list[int]]] = {}
    for key, report in reports.items():
        topic, _, partition = key.rpartition("/")
        grouped.setdefault(topic, {}).setdefault(tuple(report), []).append(int(partition))
    return {topic: [[*report, _ranges(sorted(partitions))]
                    for report, partitions in sorted(groups.items(), key=lambda g: str(g[0]))]
            for topic, groups in sorted(grouped.items())}


def decode(registration: dict[str, Any]) -> dict[str, Report]:
    """The reports of a registration document, by ``"<topic>/<p>"``."""
    reports: dict[str, Report] = {}
    for topic, groups in (registration.get("reports") or {}).items():
        for group in groups:
            report = list(group[:-1])
            for p in _partitions(group[-1]):
                reports[f"{topic}/{p}"] = report
    return reports
