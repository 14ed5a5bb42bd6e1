"""The Access pages: the cluster's ACLs, SCRAM users and client quotas, listed and edited with
the signed-in principal's own client (``Console.admin``), so the cluster's authorizer decides:
a user it refuses sees its refusal (CLUSTER_AUTHORIZATION_FAILED, ...) and nothing changes.
The console's own viewers do not see these pages at all."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from bmq.console import access_admin
from bmq.console.access_admin import acl_binding
from bmq.console.admin import ConsoleError
from bmq.console.auth import signed_in
from bmq.console.pages import ConsolePages

# What each page lists (a blocking call of access_admin on the principal's client).
LISTINGS: dict[str, tuple[str, Callable[..., Any]]] = {
    "acls": ("access_acls.html", access_admin.acls),
    "scram_users": ("access_users.html", access_admin.scram_users),
    "quotas": ("access_quotas.html", access_admin.quotas),
}
CHOICES = {
    "resource_types": list(access_admin.RESOURCE_TYPES), "patterns": access_admin.PATTERN_TYPES,
    "operations": access_admin.OPERATIONS, "permissions": access_admin.PERMISSIONS,
    "mechanisms": list(access_admin.SCRAM_MECHANISMS), "min_iterations":
    access_admin.MIN_ITERATIONS, "quota_entities": access_admin.QUOTA_ENTITIES,
    "quota_keys": access_admin.QUOTA_KEYS,
}


def _viewer_refusal() -> str | None:
    session = signed_in.get()
    if session is not None and not session.may_change:
        return (f"{session.user} is a viewer of this console: ACLs, users and quotas are "
                f"shown to its admins and to the cluster's users the cluster allows")
    return None


def routes(console: ConsolePages) -> list[BaseRoute]:
    async def show(request: Request, which: str, error: str | None = None,
                   entered: dict[str, str] | None = None) -> Response:
        template, listing = LISTINGS[which]
        refusal = _viewer_refusal()
        if refusal is not None:
            return console.page(request, template, status=403, rows=None, error=refusal,
                                section=which, **CHOICES)
        try:
            rows = await console._call(listing, console.admin)
        except ConsoleError as failure:
            return console.page(request, template, status=403, rows=None, section=which,
                                error=str(failure) if error is None else error, **CHOICES)
        return console.page(request, template, status=400 if error else 200, rows=rows,
                            error=error, section=which, entered=entered or {}, **CHOICES)

    def page(which: str) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            return await show(request, which)
        return handle

    def change(which: str, action: Callable[[dict[str, str]], str]
               ) -> Callable[[Request], Awaitable[Response]]:
        """A POST handler: ``action`` (run in a worker thread) changes the cluster and says
        what it did; its ConsoleError is shown on the page with the form's values."""
        async def handle(request: Request) -> Response:
            form = await console._form(request)
            if form is None:
                return console._refused(request)
            try:
                done = await console._call(action, form)
            except ConsoleError as failure:
                entered = {k: v for k, v in form.items() if k != "password"}
                return await show(request, which, f"{failure}. Nothing was changed.", entered)
            return console._back(request.url_for(which), done)
        return handle

    def create_acl(form: dict[str, str]) -> str:
        access_admin.create_acl(console.admin, acl_binding(form))
        return "created the ACL"

    def delete_acl(form: dict[str, str]) -> str:
        deleted = access_admin.delete_acl(console.admin, acl_binding(form))
        if not deleted:
            raise ConsoleError("no such ACL (deleted already?)")
        return f"deleted {deleted} ACL(s)"

    def upsert_user(form: dict[str, str]) -> str:
        name, mechanism = form.get("user", ""), form.get("mechanism", "")
        try:
            iterations = int(form.get("iterations") or access_admin.MIN_ITERATIONS)
        except ValueError as error:
            raise ConsoleError("iterations must be a whole number, got "
                               f"{form.get('iterations')!r}") from error
        access_admin.upsert_scram_user(console.admin, name, mechanism, form.get("password", ""),
                                       iterations)
        return f"set {mechanism} credentials of {name.strip()}"

    def delete_user(form: dict[str, str]) -> str:
        name, mechanism = form.get("user", ""), form.get("mechanism", "")
        access_admin.delete_scram_user(console.admin, name, mechanism)
        return f"deleted {mechanism} credentials of {name}"

    def set_quota(form: dict[str, str]) -> str:
        entity, name = form.get("entity_type", ""), form.get("entity_name", "")
        key, value = form.get("key", ""), form.get("value", "")
        access_admin.set_quota(console.admin, entity, name, key, value)
        target = f"{entity} {name.strip() or '(default)'}"
        return f"removed {key} of {target}" if not value.strip() else \
            f"set {key} of {target} to {value.strip()}"

    return [
        Route("/access/acls", page("acls"), name="acls"),
        Route("/access/acls", change("acls", create_acl), methods=["POST"], name="create_acl"),
        Route("/access/acls/delete", change("acls", delete_acl), methods=["POST"],
              name="delete_acl"),
        Route("/access/users", page("scram_users"), name="scram_users"),
        Route("/access/users", change("scram_users", upsert_user), methods=["POST"],
              name="upsert_scram_user"),
        Route("/access/users/delete", change("scram_users", delete_user), methods=["POST"],
              name="delete_scram_user"),
        Route("/access/quotas", page("quotas"), name="quotas"),
        Route("/access/quotas", change("quotas", set_quota), methods=["POST"],
              name="set_quota"),
    ]
