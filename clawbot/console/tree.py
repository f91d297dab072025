"""The subagent tree of a session, live: each session below it with its agent, its
latest turn's status, when its turns began, its tokens and cost. The page follows the
tree by server-sent events: the server reads the stored family again every
``poll_seconds`` and sends the tree's HTML when it changed (stored sessions, so a console
beside the serving process sees the same tree)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from clawbot.console.context import ConsoleContext
from clawbot.console.rendering import fragment, render
from clawbot.subagents.tree import family, roots


async def _tree_html(context: ConsoleContext, key: str) -> str | None:
    root = await context.store.sessions.get(key)
    if root is None:
        return None
    nodes = await family(context.store, root)
    return fragment("tree_nodes.html", nodes=nodes, now=context.clock.now())


async def trees_page(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console
    return render(request, "trees.html", roots=await roots(context.store.sessions))


async def tree_page(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console
    key = request.query_params.get("key", "")
    html = await _tree_html(context, key)
    if html is None:
        return PlainTextResponse("No session has this key.\n", status_code=404)
    return render(request, "tree.html", key=key, tree=html)


def sse_event(event: str, html: str) -> str:
    """One server-sent event whose data is ``html`` (each line its own ``data:`` field)."""
    data = "\n".join(f"data: {line}" for line in html.splitlines() or [""])
    return f"event: {event}\n{data}\n\n"


async def tree_events(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console
    key = request.query_params.get("key", "")

    async def stream() -> AsyncIterator[str]:
        last = None
        while not await request.is_disconnected():
            html = await _tree_html(context, key)
            if html is not None and html != last:
                last = html
                yield sse_event("tree", html)
            await asyncio.sleep(context.poll_seconds)

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={"cache-control": "no-store"}
    )


routes = [
    Route("/trees", trees_page),
    Route("/tree", tree_page),
    Route("/tree/events", tree_events),
]
