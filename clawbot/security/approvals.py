"""Approvals: a tool call that needs a person's yes waits for it, asked in the chat.

A call whose risk asks (see ``clawbot.security.risk``) and that no grant covers pauses the turn at
that call. The request is stored first, with the round of tool calls it waits in (so a
restart while it waits keeps it open: the turn resumes at that very call and waits again,
without asking twice or asking the model anew; see ``clawbot.security.paused_rounds``), then sent to
the chat of the root session (a subagent's request goes to the person at the top of its chain,
labelled with the chain of agents, through the outbox's one path for internal sessions),
with buttons where the platform has them and the exact commands everywhere:
``/approve <id> [once|session]`` and ``/deny <id>``. Only the chat's approvers may answer:
in a DM its owner (nobody else can write there), in a group the senders listed in
``CLAWBOT_APPROVERS``. No answer within ``approval_timeout`` is a denial, and the model is
told so. Once answered (or expired), the request's message is edited where the platform
allows: its buttons go, and a line says what was decided and by whom (those messages are
``clawbot.security.approval_notices``).

An approved guarded call leaves a grant, for the rest of the run or for the session, so the
same tool runs without asking again (see ``clawbot.security.grants``). An unsafe tool asks at
every call, whatever was granted.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from clawbot.agents.chains import owners
from clawbot.channels.outbox import Outbox
from clawbot.clock import Clock
from clawbot.messages import ToolCallBlock, ToolResultBlock
from clawbot.policies import Risk, RiskProfile, strictest
from clawbot.routing.sessions import Session, child_id_of
from clawbot.security.approval_notices import ApprovalNotices, Note, no_note, said
from clawbot.security.approval_records import ApprovalRequest, ApprovalScope, ApprovalStatus
from clawbot.security.audit import AuditRecord, masked_arguments, requested_capabilities, summary
from clawbot.security.grants import Grants
from clawbot.security.paused_rounds import MalformedRoundError, PausedRound, ToolRound
from clawbot.settings import Settings
from clawbot.store.interface import Store

log = logging.getLogger("clawbot.approvals")

ID_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
ID_LENGTH = 6


@dataclass(frozen=True)
class Verdict:
    """Whether a call may run. ``required``: a person's answer was needed (asked now or
    before); ``result``: how it was decided, for the audit record; ``refusal``: what the
    model is told when it may not."""

    allowed: bool
    required: bool = False
    result: str | None = None
    refusal: str = ""


ALLOWED = Verdict(allowed=True)
Precheck = Callable[[], Awaitable[ToolResultBlock | None]]
"""The error result a call would end in before doing anything, or None."""


def resource_of(call: ToolCallBlock) -> str | None:
    """The path or host a call names (what a run grant is scoped to), if any."""
    for capability in requested_capabilities(call)[1:]:
        return capability
    return None


class Approvals:
    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        outbox: Outbox,
        clock: Clock,
        note: Note = no_note,
    ) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.notices = ApprovalNotices(settings=settings, outbox=outbox, note=note)
        self.grants = Grants(settings=settings, store=store, clock=clock)
        self._answers: dict[str, asyncio.Future[ApprovalRequest]] = {}
        self._calls_in_run: dict[str, Counter[str]] = {}
        self._runs_with_rounds: set[str] = set()
        # The turns that may have a saved round: those stored before this process began
        # (read once) and those this process saved. A fresh turn is in neither, so its
        # start looks nothing up (a serving process is the only one that runs turns).
        self._may_have_rounds: set[str] | None = None
        self._parked: set[asyncio.Task[Any]] = set()

    def parked(self) -> set[asyncio.Task[Any]]:
        """The turns waiting for a person's answer: a shutdown stops them at once (the
        request stays stored and answerable; the turn resumes at the next start)."""
        return set(self._parked)

    # asking ------------------------------------------------------------------------

    async def authorize(
        self,
        call: ToolCallBlock,
        risk: Risk,
        *,
        session: Session,
        run_id: str,
        trace_id: str,
        chain: Sequence[str],
        profiles: Sequence[RiskProfile],
        tool_round: ToolRound | None = None,
        check: Precheck | None = None,
    ) -> Verdict:
        """Decide whether ``call`` may run, asking the person and waiting when it must.
        ``profiles``: the risk profiles of the session's agent and of every agent above it
        (a child asks whenever any of them would). ``tool_round``: the round ``call`` is part
        of, saved with a new request; when it resumes a round saved before a restart,
        its waiting call waits for the very request the person was shown. ``check``: the
        error the call would end in anyway (a path outside the session's reach, invalid
        arguments), asked just before a person would be: such a call is refused unasked."""
        resumes = tool_round.resumes(call) if tool_round is not None else None
        if resumes is not None:
            asked = await self.store.approvals.get(resumes)
            if asked is not None:
                self._runs_with_rounds.add(run_id)
                root = (await owners(self.store.sessions, session) or [session])[-1]
                answered = await self._wait(asked, root)
                return await self._verdict(answered, session, root, resource_of(call), run_id)
        if not any(profile.asks(call.name, risk) for profile in profiles):
            return ALLOWED  # the common case: decided without a lookup
        level = strictest(profile.level(call.name, risk) for profile in profiles)
        resource = resource_of(call)
        root = (await owners(self.store.sessions, session) or [session])[-1]
        if level == "guarded":
            granted = await self.grants.granted(session, root, call.name, resource, run_id)
            if granted is not None:
                return Verdict(allowed=True, required=False, result=granted)
        if check is not None and (doomed := await check()) is not None:
            return Verdict(
                allowed=False,
                result="not asked: the call could not run",
                refusal=doomed.content.removeprefix("error: "),
            )
        # The n-th identical call of the run: a re-run after a restart finds its request
        # while it waits (one answered already is never taken for a new call's answer).
        signature = call.signature
        occurrence = self._calls_in_run.setdefault(run_id, Counter())
        while True:
            occurrence[signature] += 1
            key = hashlib.sha256(
                json.dumps([session.key, run_id, signature, occurrence[signature]]).encode()
            ).hexdigest()
            request = await self._request(
                call, level, session, root, run_id, trace_id, chain, key, tool_round
            )
            if request.status == "pending":
                break
        answered = await self._wait(request, root)
        return await self._verdict(answered, session, root, resource, run_id)

    async def _request(
        self,
        call: ToolCallBlock,
        level: Risk,
        session: Session,
        root: Session,
        run_id: str,
        trace_id: str,
        chain: Sequence[str],
        call_key: str,
        tool_round: ToolRound | None,
    ) -> ApprovalRequest:
        now = self.clock.now()
        for _ in range(5):
            wanted = ApprovalRequest(
                id="".join(secrets.choice(ID_ALPHABET) for _ in range(ID_LENGTH)),
                call_key=call_key,
                session_key=session.key,
                root_key=root.key,
                turn_id=run_id,
                trace_id=trace_id,
                tool=call.name,
                resource=resource_of(call),
                risk=level,
                chain=">".join(chain),
                summary=summary(masked_arguments(call.arguments), limit=300),
                status="pending",
                scope=None,
                answered_by=None,
                created_at=now,
                expires_at=now + timedelta(seconds=self.settings.approval_timeout),
                answered_at=None,
            )
            paused = tool_round.paused_at(call, wanted.id) if tool_round is not None else None
            opened = await self.store.approvals.open_request(wanted, paused)
            if opened is None:
                continue  # the id was taken by another request: draw again
            stored, new = opened.request, opened.new
            if new and paused is not None:
                self._runs_with_rounds.add(run_id)
                if self._may_have_rounds is not None:
                    self._may_have_rounds.add(run_id)
            if new:
                log.info("approval %s asked for %s in %s", stored.id, stored.tool, root.key)
                message_id = await self.notices.ask(stored, root)
                if message_id is not None:
                    await self.store.approvals.sent_as(stored.id, message_id)
                    stored = replace(stored, message_id=message_id)
            return stored
        raise RuntimeError("could not draw a free approval id")  # pragma: no cover

    async def _wait(self, request: ApprovalRequest, root: Session) -> ApprovalRequest:
        if request.status != "pending":
            return request
        future = self._answers.setdefault(request.id, asyncio.get_running_loop().create_future())
        remaining = (request.expires_at - self.clock.now()).total_seconds()
        task = asyncio.current_task()
        if task is not None:
            self._parked.add(task)
        try:
            return await asyncio.wait_for(asyncio.shield(future), max(0.0, remaining))
        except TimeoutError:
            expired = await self.store.approvals.answer(
                request.id, status="expired", scope=None, answered_by=None, at=self.clock.now()
            )
            if not expired:  # answered in the very moment it expired
                stored = await self.store.approvals.get(request.id)
                if stored is not None:
                    return stored
            log.info("approval %s expired unanswered", request.id)
            expired_request = _with_status(request, "expired")
            await self._audit(expired_request, self.clock.now())
            await self.notices.settle(expired_request, root)
            return expired_request
        finally:
            self._parked.discard(task)
            if self._answers.get(request.id) is future and future.done():
                del self._answers[request.id]

    async def _verdict(
        self,
        request: ApprovalRequest,
        session: Session,
        root: Session,
        resource: str | None,
        run_id: str,
    ) -> Verdict:
        if request.status == "approved":
            if request.risk == "guarded":
                await self.grants.add(request, session, root, resource, run_id)
            how = "for this session" if request.scope == "session" else "once"
            return Verdict(allowed=True, required=True, result=f"approved {how}")
        if request.status == "denied":
            who = request.answered_by or "a person"
            return Verdict(
                allowed=False,
                required=True,
                result="denied",
                refusal=f"the person denied this call ({request.tool}, request {request.id}, "
                f"answered by {who}); do not try it again, ask them what they want instead",
            )
        timeout = round(self.settings.approval_timeout)
        return Verdict(
            allowed=False,
            required=True,
            result="expired",
            refusal=f"nobody answered the approval request {request.id} for {request.tool} "
            f"within {timeout} s, so the call was denied; tell the person it needs their "
            "approval and what you wanted to do",
        )

    async def paused_round(self, session: Session, run_id: str) -> PausedRound | None:
        """The round ``run_id`` waited in for an approval when its process stopped, to
        resume from (one stored just before the process stopped, its saved copy not
        cleared yet, is found in the turn's transcript and not run twice)."""
        if self._may_have_rounds is None:
            self._may_have_rounds = await self.store.approvals.turns_with_rounds()
        if run_id not in self._may_have_rounds:
            return None
        try:
            paused = await self.store.approvals.paused_round(run_id)
        except MalformedRoundError as exc:
            log.warning("turn %s is run again from the model: %s", run_id, exc)
            await self.store.approvals.clear_rounds(run_id)
            return None
        if paused is None:
            return None
        if paused.ran_in(await self.store.injections.turn(session.key, run_id)):
            await self.store.approvals.clear_rounds(run_id)
            return None
        log.info(
            "turn %s resumes at the call that waits for approval %s", run_id, paused.request_id
        )
        self._runs_with_rounds.add(run_id)
        return paused

    async def round_ended(self, run_id: str) -> None:
        """A round of ``run_id`` is in its transcript: a round saved with a request is not
        resumed any more (a write only for the runs that saved one)."""
        if run_id in self._runs_with_rounds:
            self._runs_with_rounds.discard(run_id)
            if self._may_have_rounds is not None:
                self._may_have_rounds.discard(run_id)
            await self.store.approvals.clear_rounds(run_id)

    async def run_ended(self, run_id: str) -> None:
        """Revoke the run's grants (the few runs that hold any pay for a write). A round it
        saved stays saved: a run stopped by a shutdown resumes from it."""
        self._calls_in_run.pop(run_id, None)
        self._runs_with_rounds.discard(run_id)
        await self.grants.run_ended(run_id)

    # answering ---------------------------------------------------------------------

    async def answer(
        self,
        request_id: str,
        *,
        approve: bool,
        scope: ApprovalScope,
        chat: Session,
        sender_id: str,
        sender_name: str,
        operator: bool = False,
    ) -> str:
        """Answer a request from ``chat`` as ``sender_id``; what to tell the sender.
        ``operator``: the answer comes from the web console's operator, who is an approver
        of every chat (every other rule is the chat's)."""
        request = await self.store.approvals.get(request_id.strip().lower())
        if request is None:
            return f"No approval request has the id {request_id!r}."
        if request.root_key != chat.key:
            return f"Request {request.id} was asked in another chat: answer it there."
        if not operator and not self.may_answer(chat, sender_id):
            return (
                "Only this chat's approvers can answer approval requests (CLAWBOT_APPROVERS); "
                "ask one of them."
            )
        if request.status != "pending":
            return f"Request {request.id} was already {said(request)}."
        if approve and scope == "session" and request.risk != "guarded":
            return (
                f"{request.tool} is unsafe: every call asks, so it can only be approved once "
                f"(/approve {request.id} once)."
            )
        who = sender_name or sender_id
        status: ApprovalStatus = "approved" if approve else "denied"
        now = self.clock.now()
        stored = await self.store.approvals.answer(
            request.id, status=status, scope=scope if approve else None, answered_by=who, at=now
        )
        if not stored:
            current = await self.store.approvals.get(request.id)
            return f"Request {request.id} was already {said(current or request)}."
        answered = _with_status(request, status, scope=scope if approve else None, by=who)
        await self._audit(answered, now)
        await self.notices.settle(answered, chat)
        future = self._answers.get(request.id)
        if future is not None and not future.done():
            future.set_result(answered)
        if not approve:
            return f"Denied: {request.tool} ({request.id})."
        how = "for this session" if scope == "session" else "once"
        return f"Approved {how}: {request.tool} ({request.id})."

    def may_answer(self, chat: Session, sender_id: str) -> bool:
        """A DM's owner (the only person who can write there) or a listed approver."""
        if chat.chat_type == "dm":
            return True
        listed = set(self.settings.approvers)
        return f"{chat.channel}:{sender_id}" in listed or f"{chat.channel}:*" in listed

    async def _audit(self, request: ApprovalRequest, at: datetime) -> None:
        await self.store.audit.started(
            AuditRecord(
                kind="approval",
                trace_id=request.trace_id,
                task_id=child_id_of(request.session_key) or request.trace_id,  # as its calls
                run_id=request.turn_id,
                step_id=request.id,
                session_key=request.session_key,
                agent_id=request.chain.rsplit(">", 1)[-1],
                tool=request.tool,
                arguments={},
                requested=(f"tool:{request.tool}",),
                granted=(f"tool:{request.tool}",) if request.status == "approved" else (),
                approval_required=True,
                approval_result=said(request),
                started_at=request.created_at,
                ended_at=at,
                status="ok",
                error=None,
            )
        )


def _with_status(
    request: ApprovalRequest,
    status: ApprovalStatus,
    *,
    scope: ApprovalScope | None = None,
    by: str | None = None,
) -> ApprovalRequest:
    return replace(request, status=status, scope=scope, answered_by=by)
