"""A scheduled task as the store keeps it. Below the store: imports only the foundation."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, NamedTuple

TriggerKind = Literal["cron", "interval", "once"]
TaskStatus = Literal["active", "paused", "done", "cancelled"]
TaskMode = Literal["session", "subagent"]
"""Where a run's prompt goes: its session's ``cron`` lane, or a fresh subagent of the
session (an internal child, its own agent the task's) whose announce reaches the session."""
SCHEDULE_DEDUP_PREFIX = "schedule:"
"""Dedup ledger keys of due times claimed: ``schedule:<task id>:<due time>``."""


class ScheduledTask(NamedTuple):
    """One task. ``next_run`` is the due time not yet claimed (None once a one-off ran);
    ``last_job`` the job whose outcome is not yet counted into ``failures``."""

    id: str
    session_key: str
    agent_id: str
    kind: TriggerKind
    spec: str
    tz: str
    prompt: str
    status: TaskStatus
    next_run: datetime | None
    created_by: str = ""
    mode: TaskMode = "session"
    failures: int = 0
    last_job: str | None = None
    last_run: datetime | None = None
    created_at: datetime | None = None


def due_key(task_id: str, due: datetime) -> str:
    """The dedup key that claims one due time of a task (written with the job it starts)."""
    return f"{SCHEDULE_DEDUP_PREFIX}{task_id}:{due.isoformat()}"
