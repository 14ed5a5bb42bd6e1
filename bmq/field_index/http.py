"""Index Query over HTTP, on the port that serves ``/metrics`` (every broker and proxy):

* ``GET /topics/TOPIC/query?where=FIELD=VALUE[&where=...][&from=T][&to=T][&limit=N]``: the
  matching records as JSON lines (``application/x-ndjson``);
* ``GET /topics/TOPIC/index``: the indexed fields and how far each partition is indexed.

A malformed query is 400 and an unknown topic 404, each with ``{"error": "..."}``; 503 while
the role is still starting. With ACLs on (``authorizer.class.name``) every request is 403: the
HTTP port authenticates no one, so it must not hand out records the ACLs keep from people."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs, unquote

from bmq.field_index.query import QueryError, QueryService, UnknownTopic, query_params
from bmq.protocol.errors import KafkaError

log = logging.getLogger(__name__)

StartResponse = Callable[[str, list[tuple[str, str]]], Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def _answer(start_response: StartResponse, status: str, body: bytes,
            content_type: str = "application/json") -> list[bytes]:
    start_response(status, [("Content-Type", content_type),
                            ("Content-Length", str(len(body)))])
    return [body]


def _error(start_response: StartResponse, status: str, message: str) -> list[bytes]:
    return _answer(start_response, status, json.dumps({"error": message}).encode() + b"\n")


def index_app(service: Callable[[], QueryService | None], acls_on: bool = False) -> WsgiApp:
    """The WSGI app of ``/topics/...`` (``service()`` is None until the role has started)."""

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if acls_on:
            return _error(start_response, "403 Forbidden",
                          "Index Query over HTTP is off while ACLs are on (authorizer.class."
                          "name): this port authenticates no one")
        parts = environ.get("PATH_INFO", "").split("/")
        if len(parts) != 4 or parts[1] != "topics" or parts[3] not in ("query", "index"):
            return _error(start_response, "404 Not Found",
                          "expected /topics/TOPIC/query or /topics/TOPIC/index")
        if environ.get("REQUEST_METHOD", "GET") != "GET":
            return _error(start_response, "405 Method Not Allowed", "GET only")
        queries = service()
        if queries is None:
            return _error(start_response, "503 Service Unavailable", "starting")
        topic = unquote(parts[2])
        try:
            if parts[3] == "index":
                _, fields = queries.fields(topic)
                doc = {"topic": topic, "fields": [f.name for f in fields],
                       "partitions": [p.to_json() for p in queries.progress(topic)]}
                return _answer(start_response, "200 OK", json.dumps(doc).encode() + b"\n")
            params = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
            records = queries.query(topic, **query_params(params))
        except UnknownTopic as error:
            return _error(start_response, "404 Not Found", str(error))
        except QueryError as error:
            return _error(start_response, "400 Bad Request", str(error))
        except (OSError, KafkaError) as error:   # storage unreachable, a log closing
            log.warning("query of %s: %s", topic, error)
            return _error(start_response, "503 Service Unavailable", str(error))
        body = b"".join(json.dumps(r).encode() + b"\n" for r in records)
        return _answer(start_response, "200 OK", body, "application/x-ndjson")

    return app
