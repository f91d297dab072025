"""Every tool call inside an audit record: the runtime's one way to run a tool, so no call
escapes the record (see ``clawbot.audit`` for what a record holds)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence

from clawbot.audit import (
    MAX_ERROR_CHARS,
    AuditRecord,
    AuditStatus,
    masked_arguments,
    requested_capabilities,
)
from clawbot.messages import ToolCallBlock, ToolResultBlock, TranscriptEntry, utcnow
from clawbot.redaction import redactor
from clawbot.sessions import Session
from clawbot.store.interface import AuditLog
from clawbot.subagents.keys import child_id_of
from clawbot.subagents.origin import TurnOrigin


class AuditedCalls:
    """Runs a turn's tool calls, each written to the audit log as it starts and completed
    as it ends (ok, error, or refused: a tool the agent does not hold)."""

    def __init__(self, log: AuditLog) -> None:
        self.log = log

    async def run(
        self,
        call: ToolCallBlock,
        *,
        session: Session,
        agent_id: str,
        run_id: str,
        step: int,
        inputs: Sequence[TranscriptEntry],
        allowed: Collection[str],
        execute: Callable[[], Awaitable[ToolResultBlock]],
    ) -> ToolResultBlock:
        trace_id = TurnOrigin.of(session, run_id, inputs).trace.trace_id
        requested = requested_capabilities(call)
        refused = call.name not in allowed
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
                granted=() if refused else requested,
                approval_required=False,
                approval_result=None,
                started_at=utcnow(),
                ended_at=None,
                status="running",
                error=None,
            )
        )
        result: ToolResultBlock | None = None
        try:
            result = await execute()
        finally:
            status: AuditStatus
            error: str | None
            if result is None:
                status, error = "error", "the call was cancelled or failed"
            elif result.is_error:
                status = "refused" if refused else "error"
                error = redactor.redact(result.content.removeprefix("error: "))[:MAX_ERROR_CHARS]
            else:
                status, error = "ok", None
            await self.log.ended(record_id, status=status, error=error, ended_at=utcnow())
        return result
