"""TurnJobs: the persisted unit of scheduled work, one turn of one session, in a lane."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, NamedTuple

Lane = Literal["main", "subagent", "cron", "announce"]
LANES: tuple[Lane, ...] = ("main", "subagent", "cron", "announce")
JobStatus = Literal["queued", "running", "done", "failed", "cancelled"]
QUIET_REPLY = "HEARTBEAT_OK"
"""A ``cron`` lane turn whose reply is exactly this sends nothing: a heartbeat (or a task
told to speak only when something needs attention) found nothing to say."""


class TurnJob(NamedTuple):
    """One job as stored. ``merged_into`` names the job whose turn carries this one's input
    (messages merged into a ``[Backlog]`` turn share its outcome); ``reply_to`` is the
    platform message id a group reply quotes.

    A named tuple, not a frozen dataclass: one is built for every message, and a frozen
    dataclass sets each of its 14 fields through ``object.__setattr__`` (26,000
    instructions a job, against 8,000)."""

    id: str
    session_key: str
    lane: Lane = "main"
    status: JobStatus = "queued"
    attempts: int = 0
    owner: str | None = None
    lease_until: datetime | None = None
    merged_into: str | None = None
    reply_to: str | None = None
    replied: bool = False
    error: str | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
