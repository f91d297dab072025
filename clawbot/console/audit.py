"""The audit trail: the latest records, and everything one trace set off (a person's
message and every subagent it led to), each session's records under it, indented by
its depth below the root."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from clawbot.console.context import ConsoleContext
from clawbot.console.rendering import render
from clawbot.security.audit import summary
from clawbot.subagents.tree import depth_below_root

LATEST = 100


async def audit_page(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console
    records = await context.store.audit.tail(LATEST)
    return render(
        request, "audit.html", records=list(reversed(records)), depths={}, summary=summary
    )


async def trace_page(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console
    trace_id = request.query_params.get("id", "")
    records = await context.store.audit.trace(trace_id)
    depths = {}
    for key in dict.fromkeys(r.session_key for r in records):
        depths[key] = await depth_below_root(context.store.sessions, key)
    return render(
        request, "trace.html", trace_id=trace_id, records=records, depths=depths, summary=summary
    )


routes = [Route("/audit", audit_page), Route("/trace", trace_page)]
