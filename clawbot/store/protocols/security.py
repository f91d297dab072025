"""The repositories of the security stage: approval requests and capability grants,
and the audit log of tool calls."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from clawbot.security.approval_records import (
    ApprovalRequest,
    ApprovalScope,
    ApprovalStatus,
    Grant,
    OpenedRequest,
)
from clawbot.security.audit import AuditRecord, AuditStatus
from clawbot.security.paused_rounds import PausedRound


class Approvals(Protocol):
    """Approval requests and capability grants (see ``clawbot.security.approvals``)."""

    async def open_request(
        self, request: ApprovalRequest, paused: PausedRound | None = None
    ) -> OpenedRequest | None:
        """Store a new request (with the round its call waits in), or find the one stored
        for the same call (``call_key``). None when the request's id is another request's:
        draw another."""
        ...

    async def paused_round(self, turn_id: str) -> PausedRound | None:
        """The round a turn last waited in for an approval, while it is saved."""
        ...

    async def turns_with_rounds(self) -> set[str]:
        """The turns that have a saved round now."""
        ...

    async def clear_rounds(self, turn_id: str) -> int:
        """Forget the rounds a turn saved (they are in its transcript now)."""
        ...

    async def get(self, request_id: str) -> ApprovalRequest | None: ...

    async def pending(self) -> list[ApprovalRequest]:
        """Every request still waiting for an answer, oldest first (the web console)."""
        ...

    async def sent_as(self, request_id: str, message_id: str) -> None:
        """Remember the platform message that asked (edited once the request is answered)."""
        ...

    async def answer(
        self,
        request_id: str,
        *,
        status: ApprovalStatus,
        scope: ApprovalScope | None,
        answered_by: str | None,
        at: datetime,
    ) -> bool:
        """Record the answer of a pending request; False when it was no longer pending."""
        ...

    async def add_grant(self, grant: Grant) -> None: ...

    async def grants(self, session_key: str, tool: str) -> list[Grant]:
        """The grants a session holds for one tool (any scope, any epoch)."""
        ...

    async def grants_under(self, root_key: str) -> list[Grant]:
        """Every grant given in a root session's chat, oldest first."""
        ...

    async def clear_grants(self, root_key: str) -> int: ...

    async def revoke_run(self, run_id: str) -> int:
        """Drop the grants of a run that ended."""
        ...


class AuditLog(Protocol):
    """Audit records of tool calls and approvals (see ``clawbot.security.audit``)."""

    async def started(self, record: AuditRecord) -> int:
        """Write the record of a call that starts now; its id, to complete it."""
        ...

    async def ended(
        self,
        record_id: int,
        *,
        status: AuditStatus,
        error: str | None,
        ended_at: datetime,
        granted: tuple[str, ...],
        approval_required: bool,
        approval_result: str | None,
    ) -> None:
        """Complete a record: how the call ended, what it was granted, how it was approved."""
        ...

    async def tail(self, limit: int, *, after: int = 0) -> list[AuditRecord]:
        """The latest ``limit`` records with an id above ``after``, oldest first."""
        ...

    async def trace(self, trace_id: str) -> list[AuditRecord]:
        """Every record of one trace (a person's message and all it set off), in order."""
        ...

    async def of_runs(self, run_ids: Sequence[str]) -> list[AuditRecord]:
        """Every record of these runs (turns), in order (a conversation's page)."""
        ...

    async def all(self) -> list[AuditRecord]:
        """Every record, oldest first (for an export)."""
        ...
