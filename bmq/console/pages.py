"""What the page modules of their own (access.py, session_pages.py, produce.py, ...) use of
the console's routes (app.Console), as a Protocol: they build their routes on it without
importing app.py, which imports them to mount their routes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from bmq.console.admin import ClusterAdmin
from bmq.console.auth import SignIn
from bmq.console.csrf import CsrfGuard

T = TypeVar("T")


class ConsolePages(Protocol):
    sign_in: SignIn
    csrf: CsrfGuard
    templates: Jinja2Templates      # its filters and globals: some pages add their own

    @property
    def admin(self) -> ClusterAdmin: ...

    async def _call(self, function: Callable[..., T], *args: Any) -> T: ...

    def page(self, request: Request, template: str, status: int = 200,
             **context: Any) -> Response: ...

    async def _form(self, request: Request) -> dict[str, str] | None: ...

    def _refused(self, request: Request) -> Response: ...

    @staticmethod
    def _back(url: URL | str, notice: str) -> Response: ...
