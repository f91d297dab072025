"""The console's ASGI app: every page's routes behind the login, the static files
(htmx, its server-sent-events extension, the style sheet) served from the package, and
security headers on every response."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from clawbot.console import (
    agents,
    approvals,
    audit,
    conversation,
    logs,
    memory,
    schedules,
    sessions,
    setup,
    tree,
    usage,
)
from clawbot.console.auth import RequireLogin, login, logout
from clawbot.console.context import ConsoleContext
from clawbot.console.rendering import security_headers


class SecurityHeaders:
    """ASGI middleware: the content security policy and friends on every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.headers = [(k.encode(), v.encode()) for k, v in security_headers().items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *self.headers]
            await send(message)

        await self.app(scope, receive, with_headers)


def console_app(context: ConsoleContext) -> Starlette:
    """The console for ``context``'s bot (served by ``clawbot.console.server``)."""
    routes: list[BaseRoute] = [
        Route("/login", login),
        Route("/logout", logout, methods=["POST"]),
        Mount("/static", app=StaticFiles(packages=[("clawbot.console", "static")]), name="static"),
        *sessions.routes,
        *conversation.routes,
        *tree.routes,
        *audit.routes,
        *approvals.routes,
        *agents.routes,
        *memory.routes,
        *schedules.routes,
        *usage.routes,
        *logs.routes,
        *setup.routes,
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(SecurityHeaders), Middleware(RequireLogin)],
    )
    app.state.console = context
    return app
