"""Logging in to the console: a token printed once as a login URL (only its hash is
stored), then a cookie per browser (only its hash is stored either) that is Secure,
HttpOnly and SameSite=Strict, and a CSRF token per login that every form and htmx request
sends back. A wrong or missing token, an unknown or expired cookie: 401, the same page
for each, so nothing hints at which part was wrong."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from clawbot.console.context import ConsoleContext
from clawbot.store.records import ConsoleLogin

COOKIE = "clawbot_console"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
UNAUTHORIZED = "401 Unauthorized: open the login URL `clawbot console` printed.\n"
FORBIDDEN = "403 Forbidden: the form was stale or forged; reload the page and try again.\n"
PUBLIC_PATHS = ("/login", "/static/")


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def login_url(host: str, port: int, token: str, *, tls: bool = False) -> str:
    shown = f"[{host}]" if ":" in host else host
    scheme = "https" if tls else "http"
    return f"{scheme}://{shown}:{port}/login?token={quote(token)}"


async def new_token(context: ConsoleContext) -> str:
    """A fresh login token, its hash stored in place of the last one's; the token itself
    is only returned (to be printed once)."""
    token = secrets.token_urlsafe(32)
    await context.store.console.set_token(digest(token), context.clock.now())
    return token


def unauthorized() -> Response:
    return PlainTextResponse(UNAUTHORIZED, status_code=401)


async def login(request: Request) -> Response:
    """``/login?token=…``: the right token opens a login and sets its cookie; anything else
    is a 401 that says nothing more."""
    context: ConsoleContext = request.app.state.console
    token = request.query_params.get("token", "")
    stored = await context.store.console.token_hash()
    if not token or stored is None or not hmac.compare_digest(digest(token), stored):
        return unauthorized()
    cookie = secrets.token_urlsafe(32)
    now = context.clock.now()
    lifetime = timedelta(hours=context.settings.console_login_hours)
    await context.store.console.open_login(
        digest(cookie), secrets.token_urlsafe(24), now, now + lifetime
    )
    response = RedirectResponse("/", status_code=303)  # the token leaves the address bar
    response.set_cookie(
        COOKIE,
        cookie,
        max_age=int(lifetime.total_seconds()),
        httponly=True,
        secure=True,
        samesite="strict",
        path="/",
    )
    return response


async def logout(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console
    cookie = request.cookies.get(COOKIE)
    if cookie:
        await context.store.console.close_login(digest(cookie))
    response = PlainTextResponse("Logged out.\n")
    response.delete_cookie(COOKIE, path="/", secure=True, httponly=True, samesite="strict")
    return response


@dataclass(frozen=True)
class Operator:
    """The logged-in operator of one request: the CSRF token its forms carry."""

    csrf_token: str


def operator_of(request: Request) -> Operator:
    operator: Operator = request.scope["operator"]
    return operator


async def csrf_ok(request: Request, operator: Operator) -> bool:
    """Whether a state-changing request carries this login's CSRF token (a form field,
    or the header htmx sends)."""
    sent = request.headers.get(CSRF_HEADER)
    if sent is None:
        form = await request.form()
        value = form.get(CSRF_FIELD)
        sent = value if isinstance(value, str) else None
    return sent is not None and hmac.compare_digest(sent, operator.csrf_token)


class RequireLogin:
    """ASGI middleware: every path but the login and the static files needs a live login's
    cookie (else 401); every request that is not a GET or HEAD needs its CSRF token too
    (else 403)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(PUBLIC_PATHS):
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        found = await _login(request)
        if found is None:
            await unauthorized()(scope, receive, send)
            return
        operator = Operator(found.csrf_token)
        scope["operator"] = operator
        if request.method in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        body = await request.body()  # read once here, handed on to the page below
        if not await csrf_ok(request, operator):
            await PlainTextResponse(FORBIDDEN, status_code=403)(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body already read, then whatever comes next."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _login(request: Request) -> ConsoleLogin | None:
    context: ConsoleContext = request.app.state.console
    cookie = request.cookies.get(COOKIE)
    if not cookie:
        return None
    return await context.store.console.login(digest(cookie), context.clock.now())
