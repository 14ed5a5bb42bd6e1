"""The Index Query form of a topic: the console asks a broker's HTTP port (the one serving
``/metrics``, given to it with ``--metrics``) ``GET /topics/TOPIC/query`` and ``/index``, as
``bmq query --http`` does, and shows the records it answers. Any broker or proxy answers for
every topic; the console asks the ports in order until one answers. The broker's refusal of a
malformed query (HTTP 400 with ``{"error": ...}``) is shown as it came."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bmq.console.admin import REQUEST_TIMEOUT_S, ClusterAdmin, ConsoleError
from bmq.console.pages import ConsolePages

NO_PORT = ("the console knows no broker's HTTP port: start it with --metrics "
           "http://HOST:PORT (a broker's --metrics-port)")


@dataclass(frozen=True)
class Found:
    partition: int
    offset: int
    timestamp: int
    key: str | None
    value: str | None
    headers: list[tuple[str, str | None]]


def ask(admin: ClusterAdmin, path: str) -> bytes:
    """``path`` of the first broker HTTP port that answers; ConsoleError with the broker's
    error for a 4xx/5xx, or when none answers."""
    if not admin.metrics_urls:
        raise ConsoleError(NO_PORT)
    failures = []
    for base in admin.metrics_urls:
        try:
            with urllib.request.urlopen(base.rstrip("/") + path,
                                        timeout=REQUEST_TIMEOUT_S) as answer:
                body: bytes = answer.read()
                return body
        except urllib.error.HTTPError as refused:
            raise ConsoleError(_error_of(refused)) from None
        except (urllib.error.URLError, OSError) as error:
            failures.append(f"{base}: {getattr(error, 'reason', error)}")
    raise ConsoleError("no broker HTTP port answered: " + "; ".join(failures))


def _error_of(refused: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(refused.read())["error"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {refused.code} {refused.reason}"


def indexed_fields(admin: ClusterAdmin, topic: str) -> list[str]:
    doc: dict[str, Any] = json.loads(ask(admin, f"/topics/{quote(topic, safe='')}/index"))
    return [str(name) for name in doc.get("fields", [])]


def query(admin: ClusterAdmin, topic: str, form: Mapping[str, str]) -> list[Found]:
    """The records whose indexed fields match the form's ``FIELD=VALUE`` lines (ANDed),
    within its from/to times and limit, which the broker checks."""
    params: list[tuple[str, str]] = [
        ("where", line.strip()) for line in form.get("where", "").splitlines() if line.strip()]
    if not params:
        raise ConsoleError("type at least one FIELD=VALUE to look for")
    params += [(name, form[name].strip()) for name in ("from", "to", "limit")
               if form.get(name, "").strip()]
    body = ask(admin, f"/topics/{quote(topic, safe='')}/query?{urlencode(params)}")
    found = []
    for line in body.splitlines():
        record = json.loads(line)
        found.append(Found(record["partition"], record["offset"], record["timestamp"],
                           record.get("key"), record.get("value"),
                           [(str(h[0]), h[1]) for h in record.get("headers", [])]))
    return found


def routes(console: ConsolePages) -> list[Route]:
    async def index_query(request: Request) -> Response:
        name = request.path_params["name"]
        asked = dict(request.query_params)
        context: dict[str, Any] = {"name": name, "fields": None, "found": None,
                                   "entered": asked}
        try:
            context["fields"] = await console._call(indexed_fields, console.admin, name)
            if "where" in asked:
                context["found"] = await console._call(query, console.admin, name, asked)
        except ConsoleError as failure:
            return console.page(request, "index_query.html", status=400, error=str(failure),
                                **context)
        return console.page(request, "index_query.html", **context)

    return [Route("/topics/{name}/query", index_query, name="index_query")]
