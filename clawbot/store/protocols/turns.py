"""The repositories of the work messages set off: the turn jobs, what waits in a
session while its turn runs, and the dedup ledger of platform message ids already taken."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from clawbot.channels.interface import ChatCursor
from clawbot.messages import TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.scheduling.backlog import BacklogItem
from clawbot.scheduling.jobs import JobStatus, TurnJob
from clawbot.store.records import (
    DeferredContext,
    JobSummary,
    SessionActivity,
    StoredBacklogItem,
)


class Jobs(Protocol):
    """TurnJobs from submission to finish, and the leases of the ones this process runs.
    A write to a job another process took over raises LeaseLostError."""

    async def submit(
        self,
        session: Session,
        job: TurnJob,
        *,
        entry: TranscriptEntry | None = None,
        item: BacklogItem | None = None,
        dedup_id: str | None = None,
        replied: Sequence[str] = (),
    ) -> bool:
        """Persist an inbound message (its transcript ``entry`` or backlog ``item``) with
        its job, durably; False, writing nothing, for a redelivered ``dedup_id``.
        ``replied`` marks jobs whose replies went out since."""
        ...

    async def start(
        self,
        session: Session,
        job_id: str,
        *,
        lease_until: datetime,
        entries: Sequence[TranscriptEntry] = (),
        carried: Sequence[str] = (),
        replied: Sequence[str] = (),
    ) -> None:
        """Begin a job's turn: drain its backlog, write its input, merge the ``carried``
        jobs into it and take its lease, atomically."""
        ...

    async def claim(self, job: TurnJob, lease_until: datetime) -> bool:
        """Take over an orphaned job; False when another process claimed it first."""
        ...

    async def requeue(self, session: Session, job_id: str, item: BacklogItem | None = None) -> None:
        """A running job waits again, without an owner, with its resume ``item``."""
        ...

    async def close(
        self,
        job_ids: Sequence[str],
        status: JobStatus,
        error: str | None = None,
        *,
        notice_of: str | None = None,
    ) -> None:
        """Close jobs (and those merged into them) that end without a normal finish; all
        count as replied but ``notice_of``, whose failure notice is still to be sent."""
        ...

    async def renew(self, job_ids: Sequence[str], until: datetime) -> None:
        """Extend the leases of jobs this process still owns."""
        ...

    async def mark_replied(self, job_ids: Sequence[str]) -> None: ...

    async def mark_delivery_failed(self, job_id: str, error: str) -> None:
        """A reply that could not be delivered leaves a visible mark on its turn."""
        ...

    async def finish(
        self,
        session: Session,
        job_id: str,
        entries: Iterable[TranscriptEntry],
        *,
        status: JobStatus = "done",
        error: str | None = None,
    ) -> None:
        """Append the turn's last entries and close its job (and those merged into it),
        atomically and durably."""
        ...

    async def open(self, session_key: str | None = None) -> list[TurnJob]:
        """Every queued or running job (of one session if given), oldest first: the work to
        recover at start-up."""
        ...

    async def unreplied(self) -> list[TurnJob]:
        """Finished turns whose reply may not have gone out before a crash."""
        ...

    async def reply_text(self, job_id: str) -> str | None:
        """The final answer a finished turn stored, for sending it again."""
        ...

    async def get(self, job_id: str) -> JobSummary | None: ...

    async def for_session(self, session_key: str) -> list[JobSummary]:
        """A session's jobs, oldest first."""
        ...

    async def activity(self, session_keys: Sequence[str]) -> list[SessionActivity]:
        """The turns of each of these sessions at a glance, in the order given; a session
        that never had a turn is left out."""
        ...


class Backlog(Protocol):
    """What waits in a session while its turn runs, durably."""

    async def items(self, session_key: str | None = None) -> list[StoredBacklogItem]:
        """The stored backlog items, oldest first; of one session if given."""
        ...

    async def defer_context(
        self, session: Session, entry: TranscriptEntry, *, dedup_id: str | None = None
    ) -> int | None:
        """Hold a context message back until the running turn ends; its row id, or None
        for a redelivered ``dedup_id``."""
        ...

    async def record_context(
        self, session: Session, rows: Sequence[int], entries: Sequence[TranscriptEntry]
    ) -> None:
        """Move held-back context messages (by row id) into the transcript."""
        ...

    async def deferred_context(self) -> list[DeferredContext]:
        """Every held-back context message, oldest first."""
        ...


class Ledger(Protocol):
    """The dedup ledger of platform message ids already taken."""

    async def forget_older_than(self, older_than: timedelta, *, chunk: int = 5000) -> int:
        """Forget the ids taken more than ``older_than`` ago; how many."""
        ...

    async def recent_chats(self, channel: str, since: datetime) -> list[ChatCursor]:
        """The chats of ``channel`` that took a platform message since ``since``, each with
        the last one it took: where a non-redelivering adapter resumes reading."""
        ...
