"""What the store hands its callers: typed, immutable records (never rows or dicts)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from clawbot.messages import TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.scheduling.backlog import BacklogItem
from clawbot.scheduling.jobs import JobStatus, Lane
from clawbot.store.rows import MessageRow


@dataclass(frozen=True)
class JobSummary:
    """One job's lane, status, attempts and error: what a check of how a turn went reads."""

    id: str
    session_key: str
    lane: Lane
    status: JobStatus
    attempts: int
    error: str | None


@dataclass(frozen=True)
class SessionActivity:
    """A session's turns at a glance: its latest job, when its first and latest began, how
    many it had, and the tokens and cost its model calls used in all (None when unknown).
    What ``/subagents`` and ``clawbot sessions tree`` show of a session."""

    session_key: str
    latest: JobSummary
    first_at: datetime
    latest_at: datetime
    turns: int
    tokens: int | None = None
    cost_usd: float | None = None


@dataclass(frozen=True)
class DeferredContext:
    """A context message (one that starts no turn) held back until its session's running
    turn ends; ``row_id`` names it for :meth:`Backlog.record_context`."""

    row_id: int
    session_key: str
    entry: TranscriptEntry


@dataclass(frozen=True)
class StoredBacklogItem:
    """A backlog item (a deferred message or a resume token) and the session it waits in."""

    session_key: str
    item: BacklogItem


COMPACTED_META = "compacted"
"""The key :meth:`Transcripts.load` sets in the meta of an entry a compaction summarized
(to that compaction's id): history shows it is no longer in the model's context."""


@dataclass(frozen=True)
class StoredEntry:
    """A transcript entry with its row id, so a compaction can name where it cut."""

    id: int
    entry: TranscriptEntry


@dataclass(frozen=True)
class TurnEnd:
    """A turn's end as the store writes it in one transaction: its transcript ``rows``, its
    job's close (``status``, ``error``, at ``stamp``) and, for a ``runner`` (the process
    that ran it), the close of the jobs merged into it."""

    job_id: str
    rows: Sequence[MessageRow]
    status: JobStatus
    error: str | None
    stamp: str
    runner: bool


@dataclass(frozen=True)
class OpenedSession:
    """A chat's stored session, and whether it was created just now: a session created now
    has no transcript yet, so nothing needs reading back for its first turn."""

    session: Session
    created: bool


@dataclass(frozen=True)
class LiveTranscript:
    """What the model sees of a conversation: the summary of its compacted part (None
    before any compaction) and the entries no compaction has summarized, oldest first."""

    summary: str | None
    entries: tuple[StoredEntry, ...]


@dataclass(frozen=True)
class NewCompaction:
    """A summary to store in place of the live entries up to ``through_id``."""

    summary: str
    through_id: int
    trigger: str
    model: str
    instructions: str = ""
    meta: dict[str, object] | None = None


@dataclass(frozen=True)
class ConsoleLogin:
    """A browser logged in to the web console: its CSRF token and when it expires."""

    csrf_token: str
    expires_at: datetime


@dataclass(frozen=True)
class SessionOverview:
    """One session as the console's list shows it: where, which agent and model, how many
    messages and when the latest was written (None before any)."""

    key: str
    channel: str
    chat_type: str
    agent_id: str
    model_override: str | None
    owner_key: str | None
    epoch: int
    messages: int
    last_activity: datetime | None


@dataclass(frozen=True)
class OwnerClaim:
    """Who runs a session's turns after a claim: this process (``mine``), or ``owner``, a
    live one. ``taken_from``: the dead process this one just took the session over from,
    whose work in it must be picked up."""

    owner: str
    mine: bool
    taken_from: str | None = None


@dataclass(frozen=True)
class Adoption:
    """One round of keeping this process's sessions: the sessions it took over from dead
    processes, and whether its own row had expired (another may have taken its sessions:
    it must claim them again before running their turns)."""

    taken: frozenset[str]
    lapsed: bool


@dataclass(frozen=True)
class OwnerNotice:
    """What one process tells another that owns a session: ``work`` (a message was stored
    for it: pick it up) or ``stop`` (``/stop`` was asked for it)."""

    kind: str
    session_key: str
