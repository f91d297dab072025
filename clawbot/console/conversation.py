"""One conversation, a page at a time (the latest first; older pages on request): each
message with its provenance, tool calls and results, and, once per turn, what the audit
kept of it: the ephemeral blocks its model saw (never in the transcript) and its trace."""

from __future__ import annotations

from collections import defaultdict

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from clawbot.console.context import ConsoleContext
from clawbot.console.rendering import render
from clawbot.messages import ToolResultBlock
from clawbot.security.audit import AuditRecord, summary

PAGE_SIZE = 100


def _number(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


async def conversation_page(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console
    key = request.query_params.get("key", "")
    session = await context.store.sessions.get(key)
    if session is None:
        return PlainTextResponse("No session has this key.\n", status_code=404)
    epoch = _number(request.query_params.get("epoch"))
    epoch = session.epoch if epoch is None else epoch
    before = _number(request.query_params.get("before"))
    stored = await context.store.transcripts.page(key, epoch, before=before, limit=PAGE_SIZE + 1)
    older = len(stored) > PAGE_SIZE
    stored = stored[-PAGE_SIZE:]
    turn_ids = [s.entry.turn_id for s in stored if s.entry.turn_id]
    records: dict[str, list[AuditRecord]] = defaultdict(list)
    for record in await context.store.audit.of_runs(turn_ids):
        records[record.run_id].append(record)
    shown: set[str] = set()
    rows = []
    for item in stored:
        entry = item.entry
        turn = entry.turn_id
        first_of_turn = turn is not None and turn not in shown
        if turn is not None:
            shown.add(turn)
        audit = records.get(turn or "", []) if first_of_turn else []
        rows.append(
            {
                "id": item.id,
                "entry": entry,
                "results": [b for b in entry.content if isinstance(b, ToolResultBlock)],
                "blocks": [
                    block
                    for record in audit
                    if record.kind == "context"
                    for block in record.arguments.get("blocks", [])
                ],
                "trace": next((r.trace_id for r in audit), None),
            }
        )
    return render(
        request,
        "conversation.html",
        session=session,
        epoch=epoch,
        rows=rows,
        older=older,
        oldest=stored[0].id if stored else None,
        total=await context.store.transcripts.count(key, epoch),
        summary=summary,
    )


routes = [Route("/conversation", conversation_page)]
