"""Approval notices: what the person reads of a request. The message that asks (the
request, what each answer allows, buttons where the platform has them and the exact
commands everywhere), sent to the root session's chat on behalf of the chain of agents, and
the same message once answered or expired: its buttons gone, a line saying what was decided
and by whom (edited where the platform allows)."""

from __future__ import annotations

from collections.abc import Callable

from clawbot.channels.outbox import Outbox
from clawbot.messages import Action
from clawbot.routing.sessions import Session
from clawbot.security.approval_records import ApprovalRequest
from clawbot.settings import Settings

Note = Callable[[str], str]
"""A tool's ``approval_note`` by the tool's name: a line of its requests (``Tool``)."""


def no_note(tool: str) -> str:
    return ""


class ApprovalNotices:
    """Sends a request's message and edits it once the request is answered."""

    def __init__(self, *, settings: Settings, outbox: Outbox, note: Note = no_note) -> None:
        self.settings = settings
        self.outbox = outbox
        self.note = note

    async def ask(self, request: ApprovalRequest, root: Session) -> str | None:
        """Send the request; the platform id of the part that carries its buttons."""
        ask = f"/approve {request.id}"
        actions = [Action(label="Approve once", command=f"{ask} once")]
        if request.risk == "guarded":
            actions.append(Action(label="Approve for this session", command=f"{ask} session"))
        actions.append(Action(label="Deny", command=f"/deny {request.id}"))
        delivery = await self.outbox.deliver_on_behalf(
            root,
            request_text(request, self.settings.approval_timeout, self.note(request.tool)),
            role=request.chain,
            actions=tuple(actions),
        )
        return delivery.parts[-1].message_id if delivery.parts else None

    async def settle(self, request: ApprovalRequest, root: Session) -> None:
        """Show the answer in the request's message and take its buttons away (a second
        press would only be told it was answered). A failed edit is logged by the outbox
        and changes nothing: the answer stands."""
        if request.message_id is not None:
            text = answered_text(request, self.note(request.tool))
            await self.outbox.edit_on_behalf(root, request.message_id, text, role=request.chain)


def said(request: ApprovalRequest) -> str:
    if request.status == "approved":
        how = "for this session" if request.scope == "session" else "once"
        return f"approved {how}" + (f" by {request.answered_by}" if request.answered_by else "")
    if request.status == "denied":
        return "denied" + (f" by {request.answered_by}" if request.answered_by else "")
    return "expired" if request.status == "expired" else "pending"


def request_text(request: ApprovalRequest, timeout: float, note: str = "") -> str:
    """The request as the person reads it: who asks, what, how risky, what the tool
    reaches (``note``), what each answer allows, its id and the commands that answer it."""
    return "\n".join(_request_lines(request, timeout, note))


def answered_text(request: ApprovalRequest, note: str = "") -> str:
    """The request's message once answered: the request without the commands that
    answered it, then what was decided and by whom ("Approved once by Ann")."""
    timeout = (request.expires_at - request.created_at).total_seconds()
    lines = _request_lines(request, timeout, note)[:-1]
    if request.status == "expired":
        lines.append(f"Expired: no answer in {timeout:g} s.")
    else:
        lines.append(said(request)[:1].upper() + said(request)[1:] + ".")
    return "\n".join(lines)


def _request_lines(request: ApprovalRequest, timeout: float, note: str) -> list[str]:
    lines = [
        f"Approval needed ({request.id}): {request.tool} — {request.risk}",
    ]
    if request.summary:
        lines.append(f"  {request.summary}")
    if note:
        lines.append(note)
    if request.risk == "guarded":
        on = f" on {request.resource.split(':', 1)[1]}" if request.resource else ""
        lines.append(
            f"Once: this call (and {request.tool}{on} for the rest of this turn). "
            f"Session: {request.tool} without asking in this session until /new or /grants clear."
        )
        answers = f"/approve {request.id} once · /approve {request.id} session · /deny {request.id}"
    else:
        lines.append("Unsafe: every call asks.")
        answers = f"/approve {request.id} once · /deny {request.id}"
    lines.append(f"Answer within {round(timeout)} s: {answers}")
    return lines
