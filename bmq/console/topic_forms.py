"""A form POSTed on one of a topic's pages (configs, produce): its CSRF token checked, its
action run, and either where the action leads or the form's page again with the refusal
(ConsoleError: the cluster's or the console's own message) and the values as typed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from starlette.requests import Request
from starlette.responses import Response

from bmq.console.admin import ConsoleError
from bmq.console.pages import ConsolePages

# (topic name, form) -> the response after it was done
Action = Callable[[str, dict[str, str]], Awaitable[Response]]
# (request, error, form as typed) -> the form's page showing the error
FormPage = Callable[[Request, str, Mapping[str, str]], Awaitable[Response]]


async def post_topic_form(console: ConsolePages, request: Request, action: Action,
                          again: FormPage) -> Response:
    form = await console._form(request)
    if form is None:
        return console._refused(request)
    try:
        return await action(request.path_params["name"], form)
    except ConsoleError as failure:
        return await again(request, str(failure), form)
