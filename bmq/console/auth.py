"""Who may use the console: its users sign in, as SCRAM users of the cluster or as the
console's own users (a file of scrypt password hashes with a role each), and get a session.

A session lives in this process (an id in a cookie signed by Starlette's SessionMiddleware with
itsdangerous; HttpOnly, SameSite=Strict, Secure when the console serves HTTPS). A cluster user's
session holds a ClusterAdmin logged in with that user's own password, so the cluster's
authorizer decides what the user may see and do; a console user acts as the console's own
principal, and a viewer may change nothing. Sessions end with sign-out, after SESSION_MAX_AGE_S
or when the process stops."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from bmq.client.login import login
from bmq.client.metadata import bootstrap_addresses
from bmq.client.requests import ask_once
from bmq.console.admin import REQUEST_TIMEOUT_S, ClusterAdmin, ConsoleError
from bmq.net.client import LinkError
from bmq.protocol.messages import ApiVersionsRequest
from bmq.security.link import LinkAuthenticationError
from bmq.security.scram import MECHANISMS

ROLES = ("viewer", "admin")
SESSION_MAX_AGE_S = 8 * 3600
SESSION_COOKIE = "bmq_console_session"
# Cluster users' sessions each hold a librdkafka client and a thread: past this many, the
# oldest session ends.
MAX_SESSIONS = 200
# scrypt's cost (RFC 7914; n=2^15, r=8, p=1: ~0.1 s and 32 MiB a check, OWASP's minimum).
SCRYPT_N, SCRYPT_R, SCRYPT_P = 1 << 15, 8, 1
# Paths answered to anyone: the sign-in page and the assets it needs.
OPEN_PATHS = ("/sign-in", "/static/")
WRONG_PASSWORD = "sign-in refused: unknown user or wrong password"
# Failed sign-ins of one user from one address before its next tries are refused unchecked,
# and for how long after the last failure: a password is not guessed at the console's speed.
MAX_FAILURES, FAILURE_WINDOW_S = 5, 300.0
# (user, address) pairs with failures kept before the stale ones are dropped.
MAX_FAILURE_KEYS = 10_000


def hash_password(password: str) -> str:
    """``scrypt$N$r$p$salt$hash`` (salt and hash base64), what the users file keeps."""
    salt = secrets.token_bytes(16)
    digest = _scrypt(password, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
    return "$".join(("scrypt", str(SCRYPT_N), str(SCRYPT_R), str(SCRYPT_P),
                     base64.b64encode(salt).decode(), base64.b64encode(digest).decode()))


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, maxmem=256 << 20,
                          dklen=32)


def check_password(stored: str, password: str) -> bool:
    try:
        kind, n, r, p, salt, digest = stored.split("$")
        if kind != "scrypt":
            return False
        computed = _scrypt(password, base64.b64decode(salt), int(n), int(r), int(p))
        return hmac.compare_digest(computed, base64.b64decode(digest))
    except ValueError:
        return False


class WrongPassword(ConsoleError):
    """The user is unknown or the password wrong (either kind of user, same words)."""


@dataclass(frozen=True)
class ConsoleUser:
    name: str
    role: str
    password_hash: str


def load_users(path: Path) -> dict[str, ConsoleUser]:
    """The console's users: ``{"users": {NAME: {"role": ROLE, "password": HASH}}}``."""
    try:
        document = json.loads(path.read_text())
        users = {name: ConsoleUser(name, entry["role"], entry["password"])
                 for name, entry in document["users"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"cannot read the console's users from {path}: {error}") from error
    for user in users.values():
        if user.role not in ROLES:
            raise ValueError(f"cannot read the console's users from {path}: {user.name}'s "
                             f"role {user.role!r} is not one of {', '.join(ROLES)}")
    return users


def add_user(path: Path, name: str, password: str, role: str) -> None:
    """Adds or replaces ``name`` in the users file (made if missing, readable by its owner only)."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
    if not name or not password:
        raise ValueError("a user needs a name and a password")
    users = load_users(path) if path.exists() else {}
    users[name] = ConsoleUser(name, role, hash_password(password))
    text = json.dumps({"users": {u.name: {"role": u.role, "password": u.password_hash}
                                 for u in users.values()}}, indent=2) + "\n"
    fresh = path.with_name(path.name + ".new")
    fresh.write_text(text)
    os.chmod(fresh, 0o600)
    fresh.replace(path)


@dataclass
class Session:
    user: str
    kind: str                    # "cluster" (a SCRAM user) or "console" (the users file)
    role: str                    # "admin" or "viewer"; a cluster user's authorizer decides
    admin: ClusterAdmin | None   # a cluster user's own client; None: the console's principal
    expires: float

    @property
    def may_change(self) -> bool:
        return self.kind == "cluster" or self.role == "admin"


# The signed-in session of the request being handled (set by SignInGate).
signed_in: ContextVar[Session | None] = ContextVar("signed_in", default=None)


class SignIn:
    """Checks passwords and keeps the sessions. ``scram_mechanism``: cluster users sign in
    with it (the console logs in to the cluster as them); ``users``: the console's own."""

    def __init__(self, bootstrap: str, properties: dict[str, str] | None = None,
                 users_path: Path | None = None, scram_mechanism: str | None = None,
                 scram_bootstrap: str | None = None, secret: bytes | None = None,
                 https: bool = False, metrics_urls: tuple[str, ...] = ()) -> None:
        """``scram_bootstrap``: where cluster users log in, when not at ``bootstrap`` (a
        listener of their own); ``metrics_urls``: the brokers' HTTP ports, for the clients of
        signed-in users as for the console's own (ClusterAdmin)."""
        if scram_mechanism is not None and scram_mechanism.upper() not in MECHANISMS:
            raise ValueError(f"SCRAM sign-in: mechanism must be one of {', '.join(MECHANISMS)}, "
                             f"got {scram_mechanism!r}")
        self.bootstrap = bootstrap
        self._properties = dict(properties or {})
        self.users_path = users_path
        if users_path is not None:
            load_users(users_path)      # a file that cannot be read fails the start
        self.scram_mechanism = scram_mechanism.upper() if scram_mechanism else None
        self.scram_bootstrap = scram_bootstrap or bootstrap
        self.secret = secret or secrets.token_bytes(32)
        self.https = https
        self.metrics_urls = metrics_urls
        self._sessions: dict[str, Session] = {}
        self._failures: dict[tuple[str, str], list[float]] = {}   # (user, client) -> times
        self._unknown_user_hash = hash_password(secrets.token_hex(16)) if users_path else ""
        self._lock = threading.Lock()

    @property
    def required(self) -> bool:
        return self.users_path is not None or self.scram_mechanism is not None

    def cluster_properties(self, user: str, password: str) -> dict[str, str]:
        """The console's client properties with a cluster user's SCRAM login instead of its
        own: TLS as the console's (SASL_SSL when it uses SSL), the SCRAM mechanism chosen."""
        protocol = self._properties.get("security.protocol", "PLAINTEXT").upper()
        return {**self._properties,
                "security.protocol": "SASL_SSL" if "SSL" in protocol else "SASL_PLAINTEXT",
                "sasl.mechanism": self.scram_mechanism or "", "sasl.username": user,
                "sasl.password": password}

    def sign_in(self, user: str, password: str, client: str = "") -> str:
        """A new session's id; ConsoleError when the password is wrong (either kind), or
        without checking it after MAX_FAILURES failures of ``user`` from ``client`` (its
        address: a user is not locked out by failures from elsewhere)."""
        key = (user, client)
        failures = self._failures.get(key, [])
        recent = [at for at in failures if at > time.monotonic() - FAILURE_WINDOW_S]
        if len(recent) >= MAX_FAILURES:
            wait = recent[0] + FAILURE_WINDOW_S - time.monotonic()
            raise ConsoleError(f"sign-in refused: {len(recent)} failed sign-ins of {user} from "
                               f"this address; try again in {wait:.0f} s")
        try:
            session = self._console_user(user, password) or self._cluster_user(user, password)
            if session is None:
                raise WrongPassword(WRONG_PASSWORD)
        except WrongPassword:
            with self._lock:
                self._failures[key] = [*recent, time.monotonic()]
                if len(self._failures) > MAX_FAILURE_KEYS:    # forget the stale ones
                    since = time.monotonic() - FAILURE_WINDOW_S
                    self._failures = {k: v for k, v in self._failures.items() if v[-1] > since}
            raise
        self._failures.pop(key, None)
        session_id = secrets.token_urlsafe(24)
        with self._lock:
            now = time.time()
            # Expired sessions end here too (a cluster user's holds a client and a thread),
            # not only when their cookie comes back.
            for expired in [key for key, old in self._sessions.items() if old.expires < now]:
                self._end(expired)
            self._sessions[session_id] = session
            while len(self._sessions) > MAX_SESSIONS:
                self._end(next(iter(self._sessions)))
        return session_id

    def _console_user(self, user: str, password: str) -> Session | None:
        if self.users_path is None:
            return None
        try:
            known = load_users(self.users_path).get(user)
        except ValueError as error:
            raise ConsoleError(str(error)) from error
        if known is None:
            # As long as a known user's check: the time taken does not tell who exists.
            check_password(self._unknown_user_hash, password)
            return None
        if not check_password(known.password_hash, password):
            return None
        return Session(user, "console", known.role, None, time.time() + SESSION_MAX_AGE_S)

    def _cluster_user(self, user: str, password: str) -> Session | None:
        if self.scram_mechanism is None:
            return None
        properties = self.cluster_properties(user, password)
        check_login(self.scram_bootstrap, properties)
        admin = ClusterAdmin(self.scram_bootstrap, properties, self.metrics_urls)
        return Session(user, "cluster", "admin", admin, time.time() + SESSION_MAX_AGE_S)

    def session(self, session_id: object) -> Session | None:
        if not isinstance(session_id, str):
            return None
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None and session.expires < time.time():
                self._end(session_id)
                return None
            return session

    def sign_out(self, session_id: object) -> None:
        with self._lock:
            if isinstance(session_id, str) and session_id in self._sessions:
                self._end(session_id)

    def _end(self, session_id: str) -> None:
        session = self._sessions.pop(session_id)
        if session.admin is not None:
            session.admin.close()

    def close(self) -> None:
        with self._lock:
            for session_id in list(self._sessions):
                self._end(session_id)


def check_login(bootstrap: str, properties: dict[str, str]) -> None:
    """Logs in to the first bootstrap server with ``properties`` (one ApiVersions request on a
    connection of its own): ConsoleError saying why when the broker refuses the login."""
    try:
        asyncio.run(ask_once(bootstrap_addresses(bootstrap)[0], ApiVersionsRequest(), 0,
                             REQUEST_TIMEOUT_S, "bmq-console", login(properties)))
    except LinkError as error:
        if isinstance(error.__cause__, LinkAuthenticationError):
            raise WrongPassword(WRONG_PASSWORD) from error
        raise ConsoleError(f"cannot check the password with {bootstrap}: {error}") from error
    except TimeoutError as error:
        raise ConsoleError(f"cannot check the password: no answer from {bootstrap}") from error


class SignInGate:
    """ASGI middleware inside SessionMiddleware: a request without a live session goes to the
    sign-in page (htmx's polls are told to go there with HX-Redirect) and changes nothing;
    with one, ``signed_in`` holds it while the request is handled."""

    def __init__(self, app: ASGIApp, sign_in: SignIn) -> None:
        self.app = app
        self.sign_in = sign_in

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.sign_in.required:
            await self.app(scope, receive, send)
            return
        session = self.sign_in.session(scope["session"].get("id"))
        path: str = scope["path"]
        if session is None and not path.startswith(OPEN_PATHS):
            await self._to_sign_in(Request(scope)).__call__(scope, receive, send)
            return
        token = signed_in.set(session)
        try:
            await self.app(scope, receive, send)
        finally:
            signed_in.reset(token)

    @staticmethod
    def _to_sign_in(request: Request) -> Response:
        """To the sign-in page, and back after it: to the page asked for, or for an htmx
        poll to the page it polls from (not to the fragment it asked for)."""
        polling = bool(request.headers.get("hx-request"))
        url = urlsplit(request.headers.get("hx-current-url", "")) if polling else request.url
        target = (url.path or "/") + (f"?{url.query}" if url.query else "")
        location = f"{request.scope.get('root_path', '')}/sign-in?next={quote(target)}"
        if polling:
            return Response(status_code=401, headers={"HX-Redirect": location})
        return RedirectResponse(location, status_code=303)


def session_settings(sign_in: SignIn) -> dict[str, Any]:
    """SessionMiddleware's arguments: signed cookie, HttpOnly (always), SameSite=Strict,
    Secure over HTTPS, its signature older than a session refused."""
    return {"secret_key": sign_in.secret.hex(), "session_cookie": SESSION_COOKIE,
            "max_age": SESSION_MAX_AGE_S, "same_site": "strict", "https_only": sign_in.https}
