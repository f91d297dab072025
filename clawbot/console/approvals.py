"""Pending approvals, answered from the console through the very path the chat's
``/approve`` and ``/deny`` take (``Approvals.answer``: the same checks, the same audit
record, the request's message in the chat edited to say who answered), the console's
operator being an approver of every chat."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from clawbot.console.context import ConsoleContext
from clawbot.console.operator import OPERATOR, OPERATOR_ID
from clawbot.console.rendering import render
from clawbot.security.approval_records import ApprovalScope

BESIDE = (
    "This console runs beside the serving process: a waiting turn is answered there, in "
    "the chat (/approve, /deny) or in `clawbot run --console`."
)


async def _page(request: Request, notice: str = "", problem: str = "") -> Response:
    context: ConsoleContext = request.app.state.console
    return render(
        request,
        "approvals.html",
        pending=await context.store.approvals.pending(),
        answerable=context.approvals is not None,
        notice=notice,
        problem=problem or ("" if context.approvals is not None else BESIDE),
    )


async def approvals_page(request: Request) -> Response:
    return await _page(request)


async def answer(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console
    if context.approvals is None:
        return await _page(request)
    form = await request.form()
    request_id = str(request.path_params["request_id"])
    choice = str(form.get("answer", ""))
    if choice not in ("once", "session", "deny"):
        return await _page(request, problem="Answer once, session or deny.")
    asked = await context.store.approvals.get(request_id)
    root = await context.store.sessions.get(asked.root_key) if asked is not None else None
    if asked is None or root is None:
        return await _page(request, problem=f"No approval request has the id {request_id!r}.")
    scope: ApprovalScope = "session" if choice == "session" else "once"
    said = await context.approvals.answer(
        request_id,
        approve=choice != "deny",
        scope=scope,
        chat=root,
        sender_id=OPERATOR_ID,
        sender_name=OPERATOR,
        operator=True,
    )
    return await _page(request, notice=said)


routes = [
    Route("/approvals", approvals_page),
    Route("/approvals/{request_id}", answer, methods=["POST"]),
]
