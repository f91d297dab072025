"""What the console's operator changed, in the audit log (kind ``operator``): an agent
created or edited, a memory forgotten. An approval answered from the console is audited
by the approvals' own record, answered by ``operator (console)``."""

from __future__ import annotations

from typing import Any

from clawbot.console.context import ConsoleContext
from clawbot.security.audit import AuditRecord, masked_arguments
from clawbot.store import new_id

OPERATOR = "operator (console)"
"""Who the console's operator is, where an answer or a change names its author."""
OPERATOR_ID = "console:operator"
"""The sender id of the console's operator."""


async def audit_change(context: ConsoleContext, action: str, **details: Any) -> None:
    """One ``operator`` record: ``action`` (``agent_update``...) and what it changed."""
    now = context.clock.now()
    trace = new_id("console")
    await context.store.audit.started(
        AuditRecord(
            kind="operator",
            trace_id=trace,
            task_id=trace,
            run_id=trace,
            step_id=trace,
            session_key=OPERATOR_ID,
            agent_id="operator",
            tool=action,
            arguments=masked_arguments(details),
            requested=(),
            granted=(),
            approval_required=False,
            approval_result=None,
            started_at=now,
            ended_at=now,
            status="ok",
            error=None,
        )
    )
