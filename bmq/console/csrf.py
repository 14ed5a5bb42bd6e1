"""CSRF protection of the console's forms: each browser gets a random id in a SameSite=Strict
cookie, and each form carries a token, the HMAC of that id under a secret of this console
process. A POST whose token does not match its cookie changes nothing: another site can make a
browser send the cookie, but cannot read it to compute the token."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from starlette.requests import Request
from starlette.responses import Response

COOKIE = "bmq_console_id"
FIELD = "csrf_token"


class CsrfGuard:
    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    def _token_for(self, browser_id: str) -> str:
        return hmac.new(self._secret, browser_id.encode(), hashlib.sha256).hexdigest()

    def browser_id(self, request: Request) -> str:
        """The request's browser id: its cookie's, or a new one that ``remember`` sets."""
        known = request.cookies.get(COOKIE)
        if known:
            return known
        fresh: str = request.state.__dict__.setdefault("new_browser_id", secrets.token_hex(16))
        return fresh

    def token(self, request: Request) -> str:
        return self._token_for(self.browser_id(request))

    def remember(self, request: Request, response: Response) -> None:
        """Sets the cookie on a response to a browser that had none."""
        fresh = request.state.__dict__.get("new_browser_id")
        if fresh and not request.cookies.get(COOKIE):
            response.set_cookie(COOKIE, fresh, httponly=True, samesite="strict",
                                secure=request.url.scheme == "https")

    def is_valid(self, request: Request, submitted: object) -> bool:
        browser_id = request.cookies.get(COOKIE)
        if not browser_id or not isinstance(submitted, str):
            return False
        return hmac.compare_digest(self._token_for(browser_id), submitted)
