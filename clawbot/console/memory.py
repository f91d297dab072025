"""The agents' memories: the latest, or the best matches of a search (the store's own
search, which takes any text as words, never as syntax), each with a button to forget it.
A forgotten memory is audited with the operator as actor."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from clawbot.console.context import ConsoleContext
from clawbot.console.operator import audit_change
from clawbot.console.rendering import render
from clawbot.memory.records import Memory, MemoryQuery

SHOWN = 50


async def _page(request: Request, search: str, notice: str = "") -> Response:
    context: ConsoleContext = request.app.state.console
    memories: list[Memory]
    if search.strip():
        query = MemoryQuery(text=search, session_key="", agent_id="", namespaces=None, limit=SHOWN)
        memories = [hit.memory for hit in await context.store.memories.search(query)]
    else:
        every = await context.store.memories.list()
        memories = sorted(every, key=lambda m: m.updated_at, reverse=True)[:SHOWN]
    return render(request, "memory.html", memories=memories, search=search, notice=notice)


async def memory_page(request: Request) -> Response:
    return await _page(request, request.query_params.get("q", "")[:500])


async def forget(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console
    form = await request.form()
    namespace, key = str(form.get("namespace", "")), str(form.get("key", ""))
    search = str(form.get("q", ""))[:500]
    if await context.store.memories.forget(namespace, key):
        await audit_change(context, "memory_forget", memory=f"{namespace}:{key}")
        return await _page(request, search, notice=f"Forgot {namespace}:{key}.")
    return await _page(request, search, notice=f"No memory {namespace}:{key} (already gone?).")


routes = [Route("/memory", memory_page), Route("/memory/forget", forget, methods=["POST"])]
