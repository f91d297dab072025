"""The first page: every session, the latest active first, searchable by key, channel,
agent or model, with its messages, last activity, tokens and cost."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from clawbot.console.context import ConsoleContext
from clawbot.console.rendering import render
from clawbot.console.setup import configured
from clawbot.runtime.usage import format_usd

PAGE_SIZE = 50


def _offset(request: Request) -> int:
    text = request.query_params.get("offset", "0")
    return max(0, int(text)) if text.isdigit() else 0


async def sessions_page(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console
    search = request.query_params.get("q", "")[:200]
    offset = _offset(request)
    rows = await context.store.console.overview(search, limit=PAGE_SIZE + 1, offset=offset)
    more, rows = len(rows) > PAGE_SIZE, rows[:PAGE_SIZE]
    activity = {a.session_key: a for a in await context.store.jobs.activity([r.key for r in rows])}
    usage = {}
    for key, seen in activity.items():
        parts = []
        if seen.tokens is not None:
            parts.append(f"{seen.tokens:,} tokens")
        if seen.cost_usd is not None:
            parts.append(format_usd(seen.cost_usd))
        usage[key] = " · ".join(parts) or "-"
    owners = set(await context.store.sessions.owners())
    return render(
        request,
        "sessions.html",
        rows=rows,
        usage=usage,
        owners=owners,
        search=search,
        offset=offset,
        more=more,
        page_size=PAGE_SIZE,
        default_model=context.settings.model,
        models={spec.agent_id: spec.model for spec in context.agents.all()},
        first_run=not configured(context.settings),
    )


routes = [Route("/", sessions_page)]
