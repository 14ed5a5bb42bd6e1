"""The sign-in page and sign-out: a session's id goes into the signed session cookie, a new
one at each sign-in (an id known before it, e.g. planted by someone else, never gets a user)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from bmq.console.admin import ConsoleError
from bmq.console.csrf import FIELD
from bmq.console.pages import ConsolePages


def _local(target: str | None) -> str:
    """Where to go after signing in: a path of this console only (never another site's)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def routes(console: ConsolePages) -> list[BaseRoute]:
    sign_in = console.sign_in

    async def sign_in_page(request: Request) -> Response:
        return console.page(request, "sign_in.html", next=_local(request.query_params.get("next")),
                            methods=_methods())

    async def signed_form(request: Request) -> dict[str, str] | None:
        """The form when its CSRF token matches; whoever is signed in (a viewer too: signing
        in and out changes nothing of the cluster's, so not Console._form)."""
        form = await request.form()
        if not console.csrf.is_valid(request, form.get(FIELD)):
            return None
        return {key: value for key, value in form.items() if isinstance(value, str)}

    async def sign_in_form(request: Request) -> Response:
        form = await signed_form(request)
        if form is None:
            return console._refused(request)
        target = _local(form.get("next"))
        user, password = form.get("user", "").strip(), form.get("password", "")
        try:
            if not sign_in.required:
                raise ConsoleError("this console has no sign-in: it is open to anyone who "
                                   "reaches it")
            client = request.client.host if request.client else ""
            session_id = await console._call(sign_in.sign_in, user, password, client)
        except ConsoleError as failure:
            return console.page(request, "sign_in.html", status=401, error=str(failure),
                                next=target, entered={"user": user}, methods=_methods())
        sign_in.sign_out(request.session.get("id"))     # a session signed in over ends
        request.session.clear()
        request.session["id"] = session_id
        return RedirectResponse(target, status_code=303)

    async def sign_out(request: Request) -> Response:
        if await signed_form(request) is None:
            return console._refused(request)
        sign_in.sign_out(request.session.get("id"))
        request.session.clear()
        return RedirectResponse(request.url_for("sign_in"), status_code=303)

    def _methods() -> list[str]:
        methods = []
        if sign_in.scram_mechanism:
            methods.append(f"a user of the cluster ({sign_in.scram_mechanism})")
        if sign_in.users_path is not None:
            methods.append("a user of this console")
        return methods

    return [
        Route("/sign-in", sign_in_page, name="sign_in"),
        Route("/sign-in", sign_in_form, methods=["POST"], name="sign_in_form"),
        Route("/sign-out", sign_out, methods=["POST"], name="sign_out"),
    ]
