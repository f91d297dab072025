"""The live log tail: the process's latest log lines, then each new one as it is logged
(server-sent events), secrets masked as on stderr. HTML-escaped like everything else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from html import escape

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from clawbot.console.context import ConsoleContext
from clawbot.console.rendering import render
from clawbot.console.tree import sse_event


async def logs_page(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console
    return render(request, "logs.html", lines=list(context.logs.lines))


async def log_events(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console

    async def stream() -> AsyncIterator[str]:
        yield ": following\n\n"  # a comment: the connection is open
        async for line in context.logs.follow():
            yield sse_event("line", f"<div>{escape(line)}</div>")

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={"cache-control": "no-store"}
    )


routes = [Route("/logs", logs_page), Route("/logs/events", log_events)]
