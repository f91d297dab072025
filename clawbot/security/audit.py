"""Audit records: what every tool call asked for, was granted, did and how it ended.

The vocabulary is the capabilities design's: a *trace* is everything one person's message
set off, across subagents (its id travels with every injection); a *task* is what a
session works on (the person's message for a chat, the spawned task for a subagent); a
*run* is one turn; a *step* is one tool round of it. A record is written when the call
starts and completed when it ends, so a call that never ended (a crash, a kill) shows as
``running`` for ever after, which is what an auditor needs to see.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from urllib.parse import urlsplit

from clawbot.messages import ToolCallBlock
from clawbot.redaction import redactor

AuditStatus = Literal["running", "ok", "error", "refused"]
AuditKind = Literal["tool_call", "approval", "context", "operator"]
"""``context``: the ephemeral blocks a turn's model saw (never in the transcript);
``operator``: a change made in the web console, by its operator."""

MAX_ARGUMENT_CHARS = 2_000
"""A stored argument is cut here: the record says what was asked, not every byte of it."""
MAX_ERROR_CHARS = 500
MAX_BLOCK_CHARS = 8_000
"""An ephemeral block is kept up to here in its ``context`` record."""


@dataclass(frozen=True)
class AuditRecord:
    """One audit row. ``requested`` and ``granted`` are capabilities such as
    ``tool:file_write`` and ``path:notes/todo.md``; ``approval_result`` stays None until
    approvals exist for the call's risk."""

    kind: AuditKind
    trace_id: str
    task_id: str
    run_id: str
    step_id: str
    session_key: str
    agent_id: str
    tool: str
    arguments: dict[str, Any]
    requested: tuple[str, ...]
    granted: tuple[str, ...]
    approval_required: bool
    approval_result: str | None
    started_at: datetime
    ended_at: datetime | None
    status: AuditStatus
    error: str | None
    id: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The record as one JSON object (``clawbot audit export``)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "trace_id": self.trace_id,
            "task_id": self.task_id,
            "run_id": self.run_id,
            "step_id": self.step_id,
            "session": self.session_key,
            "agent": self.agent_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "requested_capabilities": list(self.requested),
            "granted_capabilities": list(self.granted),
            "approval_required": self.approval_required,
            "approval_result": self.approval_result,
            "start_at": self.started_at.isoformat(),
            "end_at": self.ended_at.isoformat() if self.ended_at else None,
            "status": self.status,
            "error": self.error,
        }


def masked_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments as stored: secrets masked, long values cut. A value that is not a
    string stays as it was unless masking or cutting changed its JSON text."""
    masked: dict[str, Any] = {}
    for name, value in arguments.items():
        original = value if isinstance(value, str) else json.dumps(value, default=str)
        text = redactor.redact(original)
        if len(text) > MAX_ARGUMENT_CHARS:
            text = text[:MAX_ARGUMENT_CHARS] + f"… [{len(text)} characters]"
        masked[name] = value if text is original and not isinstance(value, str) else text
    return masked


def requested_capabilities(call: ToolCallBlock) -> tuple[str, ...]:
    """What a call asks to reach: the tool, and the path, folder or host its arguments
    name (the resource a grant would be scoped to)."""
    wanted = [f"tool:{call.name}"]
    for name in ("path", "cwd", "folder"):
        value = call.arguments.get(name)
        if isinstance(value, str) and value:
            wanted.append(f"path:{value[:300]}")
    url = call.arguments.get("url")
    if isinstance(url, str):
        host = urlsplit(url).hostname
        if host:
            wanted.append(f"host:{host}")
    return tuple(wanted)


def summary(arguments: dict[str, Any], limit: int = 80) -> str:
    """Arguments on one line, ``name=value`` each, cut at ``limit`` characters."""
    parts = []
    for name, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        parts.append(f"{name}={' '.join(text.split())}")
    joined = " ".join(parts)
    return joined if len(joined) <= limit else joined[: limit - 1] + "…"


def context_record(
    *,
    trace_id: str,
    task_id: str,
    run_id: str,
    session_key: str,
    agent_id: str,
    blocks: Sequence[str],
    at: datetime,
) -> AuditRecord:
    """The record of the ephemeral blocks (memory recall, announces...) one turn's model
    saw: they are never written to the transcript, so the audit is where an operator
    reads what a turn was shown. Secrets masked, each block cut at ``MAX_BLOCK_CHARS``."""
    kept = []
    for block in blocks:
        text = redactor.redact(block)
        if len(text) > MAX_BLOCK_CHARS:
            text = text[:MAX_BLOCK_CHARS] + f"… [{len(text)} characters]"
        kept.append(text)
    return AuditRecord(
        kind="context",
        trace_id=trace_id,
        task_id=task_id,
        run_id=run_id,
        step_id=f"{run_id}.context",
        session_key=session_key,
        agent_id=agent_id,
        tool="context",
        arguments={"blocks": kept},
        requested=(),
        granted=(),
        approval_required=False,
        approval_result=None,
        started_at=at,
        ended_at=at,
        status="ok",
        error=None,
    )


def audit_line(record: AuditRecord) -> str:
    """One record on one line (``clawbot audit tail``): id, time, agent, tool, status,
    duration, arguments, and the error if it failed."""
    if record.kind == "context":
        blocks = record.arguments.get("blocks", [])
        return (
            f"#{record.id} {record.started_at:%Y-%m-%d %H:%M:%S} {record.agent_id} "
            f"context: {len(blocks)} ephemeral block(s) shown to the model"
        )
    if record.kind == "operator":
        return (
            f"#{record.id} {record.started_at:%Y-%m-%d %H:%M:%S} operator (console) "
            f"{record.tool} {summary(record.arguments)} → {record.status}"
        )
    if record.kind == "approval":
        return (
            f"#{record.id} {record.started_at:%Y-%m-%d %H:%M:%S} {record.agent_id} "
            f"approval {record.step_id} for {record.tool} → {record.approval_result}"
        )
    took = ""
    if record.ended_at is not None:
        took = f" {(record.ended_at - record.started_at).total_seconds() * 1000:.0f} ms"
    error = f" — {record.error}" if record.error else ""
    return (
        f"#{record.id} {record.started_at:%Y-%m-%d %H:%M:%S} {record.agent_id} "
        f"{record.tool} {summary(record.arguments)} → {record.status}{took}{error}"
    )


def render_trace(records: Sequence[AuditRecord], depth_of: Mapping[str, int]) -> str:
    """A trace as a tree: each session's calls under it, subagents indented below the
    session that spawned them (``depth_of`` maps a session key to its depth)."""
    if not records:
        return ""
    sessions = {r.session_key for r in records}
    calls = sum(r.kind == "tool_call" for r in records)
    lines = [f"trace {records[0].trace_id}: {calls} tool calls in {len(sessions)} sessions"]
    current = None
    for record in records:
        indent = "  " * depth_of.get(record.session_key, 0)
        if record.session_key != current:
            current = record.session_key
            lines.append(f"{indent}{record.session_key} ({record.agent_id})")
        lines.append(f"{indent}  {audit_line(record)}")
    return "\n".join(lines)
