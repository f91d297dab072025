"""The runtime's one way to run a tool: approvals first, and an audit record around the
call, so no call escapes either (see ``clawbot.security.approvals`` and
``clawbot.security.audit``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence

from clawbot.messages import ToolCallBlock, ToolResultBlock, TranscriptEntry, utcnow
from clawbot.policies import Risk, RiskProfile
from clawbot.redaction import redactor
from clawbot.routing.sessions import Session, child_id_of
from clawbot.security.approvals import ALLOWED, Approvals, Precheck
from clawbot.security.audit import (
    MAX_ERROR_CHARS,
    AuditRecord,
    AuditStatus,
    masked_arguments,
    requested_capabilities,
)
from clawbot.security.origin import TurnOrigin
from clawbot.security.paused_rounds import ToolRound
from clawbot.store.protocols.security import AuditLog


class ToolGate:
    """Runs a turn's tool calls. Each is written to the audit log as it starts; a call
    that needs a person's approval waits for it (and is refused without it); the record is
    completed as the call ends (ok, error, or refused: a tool the agent does not hold, or
    an approval denied or unanswered)."""

    def __init__(self, log: AuditLog, approvals: Approvals | None = None) -> None:
        self.log = log
        self.approvals = approvals

    async def run(
        self,
        call: ToolCallBlock,
        *,
        risk: Risk | None,
        session: Session,
        agent_id: str,
        run_id: str,
        step: int,
        inputs: Sequence[TranscriptEntry],
        allowed: Collection[str],
        chain: Sequence[str],
        profiles: Sequence[RiskProfile],
        execute: Callable[[], Awaitable[ToolResultBlock]],
        tool_round: ToolRound | None = None,
        check: Precheck | None = None,
    ) -> ToolResultBlock:
        """``risk``: the called tool's declared level, None when the registry has no such
        tool (the call is refused). ``tool_round``: the round the call is part of, saved
        with an approval request it waits for (so a restart resumes the turn at this call).
        ``check``: the error the call would end in anyway, asked before a person is (see
        ``Approvals.authorize``)."""
        trace_id = TurnOrigin.of(session, run_id, inputs).trace.trace_id
        requested = requested_capabilities(call)
        refused = risk is None or call.name not in allowed
        record_id = await self.log.started(
            AuditRecord(
                kind="tool_call",
                trace_id=trace_id,
                task_id=child_id_of(session.key) or trace_id,
                run_id=run_id,
                step_id=f"{run_id}.{step}",
                session_key=session.key,
                agent_id=agent_id,
                tool=call.name,
                arguments=masked_arguments(call.arguments),
                requested=requested,
                granted=(),
                approval_required=False,
                approval_result=None,
                started_at=utcnow(),
                ended_at=None,
                status="running",
                error=None,
            )
        )
        verdict = ALLOWED
        result: ToolResultBlock | None = None
        try:
            if not refused and risk is not None and self.approvals is not None:
                verdict = await self.approvals.authorize(
                    call,
                    risk,
                    session=session,
                    run_id=run_id,
                    trace_id=trace_id,
                    chain=chain,
                    profiles=profiles,
                    tool_round=tool_round,
                    check=check,
                )
            if verdict.allowed:
                result = await execute()
            else:
                result = ToolResultBlock(
                    tool_call_id=call.id,
                    name=call.name,
                    content=f"error: not run: {verdict.refusal}",
                    is_error=True,
                )
        finally:
            status: AuditStatus
            error: str | None
            if result is None:
                status, error = "error", "the call was cancelled or failed"
            elif result.is_error:
                status = "refused" if refused or not verdict.allowed else "error"
                error = redactor.redact(result.content.removeprefix("error: "))[:MAX_ERROR_CHARS]
            else:
                status, error = "ok", None
            await self.log.ended(
                record_id,
                status=status,
                error=error,
                ended_at=utcnow(),
                granted=requested if verdict.allowed and not refused else (),
                approval_required=verdict.required,
                approval_result=verdict.result,
            )
        return result
