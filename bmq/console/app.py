"""The console's web application: Starlette routes rendering Jinja2 templates, htmx for the
parts that refresh live, every asset served from this package's static/ folder."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import URL
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from bmq.console import (
    access,
    dead_letters,
    index_query,
    log_dirs,
    message_filter,
    messages,
    metrics_view,
    produce,
    scheduled,
    session_pages,
    share_groups,
    topic_configs,
    transactions,
)
from bmq.console.admin import ClusterAdmin, ConsoleError, PartitionOffsets
from bmq.console.auth import SignIn, SignInGate, session_settings, signed_in
from bmq.console.csrf import FIELD, CsrfGuard
from bmq.console.groups import reset_offsets

HERE = Path(__file__).parent
# How often the cluster page asks for its live part; one Metadata and one DescribeCluster each.
CLUSTER_POLL_S = 2
# How often a group's page asks for its state, members and lag (DescribeGroups, OffsetFetch,
# Metadata, ListOffsets).
GROUP_POLL_S = 5
# Records the message browser shows when no count is asked for.
DEFAULT_PAGE = 100

T = TypeVar("T")


class Console:
    """The routes over one cluster; ``admin`` does the cluster's requests: the signed-in
    cluster user's own client, else the one logged in as the console's principal."""

    def __init__(self, admin: ClusterAdmin, csrf: CsrfGuard | None = None,
                 sign_in: SignIn | None = None) -> None:
        self._principal_admin = admin
        self.sign_in = sign_in or SignIn(admin.bootstrap)
        self.csrf = csrf or CsrfGuard()
        self.templates = Jinja2Templates(directory=HERE / "templates")
        self.templates.env.globals["csrf_field"] = FIELD
        self.templates.env.filters["render"] = messages.render
        self.templates.env.globals["free_rows"] = topic_configs.FREE_ROWS

    @property
    def admin(self) -> ClusterAdmin:
        session = signed_in.get()
        if session is not None and session.admin is not None:
            return session.admin
        return self._principal_admin

    async def _call(self, function: Callable[..., T], *args: Any) -> T:
        return await run_in_threadpool(function, *args)

    def page(self, request: Request, template: str, status: int = 200,
             **context: Any) -> Response:
        context.setdefault("error", None)
        context.setdefault("entered", {})
        context.setdefault("notice", request.query_params.get("notice"))
        context.update(csrf_token=self.csrf.token(request), bootstrap=self.admin.bootstrap,
                       session=signed_in.get(), sign_in_required=self.sign_in.required,
                       poll_s=CLUSTER_POLL_S, group_poll_s=GROUP_POLL_S)
        response = self.templates.TemplateResponse(request, template, context,
                                                   status_code=status)
        self.csrf.remember(request, response)
        return response

    async def _form(self, request: Request) -> dict[str, str] | None:
        """The POSTed form, or None when its CSRF token does not match the browser's or the
        signed-in user is a viewer."""
        form = await request.form()
        if not self.csrf.is_valid(request, form.get(FIELD)):
            return None
        session = signed_in.get()
        if session is not None and not session.may_change:
            request.state.refusal = f"{session.user} is a viewer: a viewer changes nothing"
            return None
        return {key: value for key, value in form.items() if isinstance(value, str)}

    def _refused(self, request: Request) -> Response:
        return self.page(request, "refused.html", status=403,
                         refusal=getattr(request.state, "refusal", None))

    @staticmethod
    def _back(url: URL | str, notice: str) -> Response:
        return RedirectResponse(URL(str(url)).include_query_params(notice=notice),
                                status_code=303)

    # -- cluster -------------------------------------------------------------------------------

    async def home(self, request: Request) -> Response:
        return RedirectResponse(request.url_for("cluster"), status_code=302)

    async def cluster(self, request: Request) -> Response:
        return await self._cluster_page(request, "cluster.html", with_control=True)

    async def cluster_live(self, request: Request) -> Response:
        return await self._cluster_page(request, "cluster_live.html")

    async def _cluster_page(self, request: Request, template: str,
                            with_control: bool = False) -> Response:
        """``with_control``: what the controller node says of the cluster's control (BMQ's
        `bmq controller`), asked once per page load, not at each poll."""
        try:
            state = await self._call(self.admin.cluster_state)
        except ConsoleError as error:
            return self.page(request, template, status=503, state=None, error=str(error))
        control = None
        if with_control and state.controller is not None:
            control = await self._call(self.admin.control, state.controller)
        return self.page(request, template, state=state, control=control)

    # -- topics --------------------------------------------------------------------------------

    async def topics(self, request: Request, error: str | None = None, status: int = 200,
                     entered: dict[str, str] | None = None) -> Response:
        """The topic list; ``entered``: a refused create form's values, shown again."""
        query = request.query_params
        internal = query.get("internal") == "1"
        contains = query.get("q", "").strip()
        try:
            page = int(query.get("page", "1"))
        except ValueError:
            page = 1
        try:
            listing = await self._call(self.admin.topics, internal, contains, page)
        except ConsoleError as failure:
            return self.page(request, "topics.html", status=503, listing=None,
                             error=str(failure))
        found = await self._call(log_dirs.describe, self.admin, [
            (t.name, p.partition) for t in listing.topics for p in t.partitions])
        sizes = {t.name: found.topic_size(t.name, len(t.partitions)) for t in listing.topics}
        return self.page(request, "topics.html", status=status, listing=listing, error=error,
                         internal=internal, contains=contains, entered=entered or {},
                         sizes=sizes)

    async def create_topic(self, request: Request) -> Response:
        form = await self._form(request)
        if form is None:
            return self._refused(request)
        name = form.get("name", "").strip()
        try:
            partitions = int(form.get("partitions", "1"))
            if not name:
                raise ConsoleError("a topic needs a name")
            if partitions < 1:
                raise ConsoleError("a topic needs at least 1 partition")
            await self._call(self.admin.create_topic, name, partitions,
                             topic_configs.create_configs(form))
        except ValueError:
            return await self.topics(request, "partitions must be a whole number, got "
                                     f"{form.get('partitions')!r}", 400, form)
        except ConsoleError as failure:
            return await self.topics(request, str(failure), 400, form)
        return self._back(request.url_for("topic", name=name), f"created topic {name}")

    async def delete_topic(self, request: Request) -> Response:
        name = request.path_params["name"]
        form = await self._form(request)
        if form is None:
            return self._refused(request)
        if form.get("confirm") != name:
            return await self.topic(request, f"type the topic's name ({name}) to delete it")
        try:
            await self._call(self.admin.delete_topic, name)
        except ConsoleError as failure:
            return await self.topic(request, str(failure))
        return self._back(request.url_for("topics"), f"deleted topic {name}")

    async def topic(self, request: Request, error: str | None = None) -> Response:
        name = request.path_params["name"]
        try:
            topic = await self._call(self.admin.topic, name)
        except ConsoleError as failure:
            return self.page(request, "topic.html", status=404, name=name, topic=None,
                             error=str(failure))
        found = await self._call(log_dirs.describe, self.admin,
                                 [(name, p.partition) for p in topic.partitions])
        return self.page(request, "topic.html", status=400 if error else 200, name=name,
                         topic=topic, error=error, sizes=found.sizes)

    async def browse(self, request: Request) -> Response:
        name = request.path_params["name"]
        query = request.query_params
        form = query.get("format", "text")
        context: dict[str, Any] = {
            "name": name, "topic": None, "page": [], "partition": 0, "offset": None,
            "count": 100, "format": form if form in messages.FORMATS else "text",
            "formats": messages.FORMATS, "max_page": messages.MAX_PAGE,
            "query": dict(query)}
        try:
            topic = context["topic"] = await self._call(self.admin.topic, name)
            partition = messages.parse_number(query.get("partition"), "partition", 0)
            chosen = next((p for p in topic.partitions if p.partition == partition), None)
            if chosen is None:
                raise ConsoleError(f"{name} has no partition {partition} "
                                   f"(it has {len(topic.partitions)})")
            context.update(partition=partition, chosen=chosen)
            context["offset"] = offset = await self._start_offset(name, chosen, query)
            context["count"] = count = messages.parse_number(
                query.get("count"), "count", DEFAULT_PAGE, 1, messages.MAX_PAGE)
            reading = (self.admin.client_config, name, partition, max(offset, chosen.start),
                       chosen.end, count)
            if query.get("filter", "").strip():
                found = await self._call(message_filter.read_matching, *reading,
                                         query["filter"])
                context.update(page=found.messages, filtered=found)
            else:
                context["page"] = await self._call(messages.read_page, *reading)
        except ConsoleError as failure:
            status = 404 if context["topic"] is None else 400
            return self.page(request, "messages.html", status=status, error=str(failure),
                             **context)
        return self.page(request, "messages.html", **context)

    async def _start_offset(self, name: str, chosen: PartitionOffsets,
                            query: Mapping[str, str]) -> int:
        """Where a page starts: the first record at or after the time asked for, else the
        offset asked for, else the partition's start."""
        when = query.get("time", "").strip()
        if not when:
            return messages.parse_number(query.get("offset"), "offset", chosen.start)
        [found] = await self._call(self.admin.offsets, [(name, chosen.partition)],
                                   (messages.parse_time(when),))
        offset = found[(name, chosen.partition)]
        return chosen.end if offset < 0 else offset

    # -- groups --------------------------------------------------------------------------------

    async def groups(self, request: Request) -> Response:
        try:
            groups = await self._call(self.admin.groups)
            groups += await self._call(share_groups.listings, self.admin)
        except ConsoleError as failure:
            return self.page(request, "groups.html", status=503, groups=[], error=str(failure))
        return self.page(request, "groups.html", groups=groups)

    async def group(self, request: Request, error: str | None = None) -> Response:
        return await self._group_page(request, "group.html", error)

    async def group_live(self, request: Request) -> Response:
        return await self._group_page(request, "group_live.html")

    async def _group_page(self, request: Request, template: str,
                          error: str | None = None) -> Response:
        group_id = request.path_params["group_id"]
        try:
            group = await self._call(self.admin.group, group_id)
        except ConsoleError as failure:
            return self.page(request, template, status=404, group_id=group_id, group=None,
                             error=str(failure))
        return self.page(request, template, status=400 if error else 200,
                         group_id=group_id, group=group, error=error)

    async def reset_group(self, request: Request) -> Response:
        group_id = request.path_params["group_id"]
        form = await self._form(request)
        if form is None:
            return self._refused(request)
        try:
            moved = await self._call(reset_offsets, self.admin, group_id, form.get("to", ""),
                                     form.get("offset"), form.get("topic") or None,
                                     form.get("time"))
        except ConsoleError as failure:
            return await self.group(request, str(failure))
        return self._back(request.url_for("group", group_id=group_id),
                          f"reset {moved} partition(s) of {group_id}")


def make_app(admin: ClusterAdmin, csrf: CsrfGuard | None = None,
             sign_in: SignIn | None = None) -> Starlette:
    """The console's app; with ``sign_in`` requiring it, every page but the sign-in page
    needs a session (SignInGate)."""
    console = Console(admin, csrf, sign_in)
    middleware = [Middleware(SessionMiddleware, **session_settings(console.sign_in)),
                  Middleware(SignInGate, sign_in=console.sign_in)]
    return Starlette(middleware=middleware, routes=[
        *session_pages.routes(console),
        *access.routes(console),
        Route("/", console.home),
        Route("/cluster", console.cluster, name="cluster"),
        Route("/cluster/live", console.cluster_live, name="cluster_live"),
        Route("/topics", console.topics, name="topics"),
        Route("/topics", console.create_topic, methods=["POST"], name="create_topic"),
        Route("/topics/{name}", console.topic, name="topic"),
        Route("/topics/{name}/delete", console.delete_topic, methods=["POST"],
              name="delete_topic"),
        Route("/topics/{name}/messages", console.browse, name="messages"),
        Route("/groups", console.groups, name="groups"),
        Route("/groups/{group_id}", console.group, name="group"),
        Route("/groups/{group_id}/live", console.group_live, name="group_live"),
        Route("/groups/{group_id}/reset", console.reset_group, methods=["POST"],
              name="reset_group"),
        *share_groups.routes(console),
        *dead_letters.routes(console),
        *transactions.routes(console),
        *scheduled.routes(console),
        *topic_configs.routes(console),
        *produce.routes(console),
        *index_query.routes(console),
        *metrics_view.routes(console),
        *log_dirs.routes(console),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ])
