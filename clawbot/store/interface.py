"""What the rest of clawbot may ask of the store: one small repository per family of tables,
and the :class:`Store` that holds them. Core code annotates with these protocols only, so
another backend (PostgreSQL, say) can stand in for ``SqliteStore`` without a change there.
Nothing here names SQLite."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from clawbot.agents.profiles import AgentRecord
from clawbot.channels.interface import ChatCursor
from clawbot.memory.records import Memory, MemoryHit, MemoryQuery
from clawbot.messages import TranscriptEntry
from clawbot.routing.pairing import PairingRequest
from clawbot.routing.sessions import Session
from clawbot.scheduling.backlog import BacklogItem
from clawbot.scheduling.jobs import JobStatus, TurnJob
from clawbot.security.approval_records import (
    ApprovalRequest,
    ApprovalScope,
    ApprovalStatus,
    Grant,
    OpenedRequest,
)
from clawbot.security.audit import AuditRecord, AuditStatus
from clawbot.security.paused_rounds import PausedRound
from clawbot.store.records import (
    DeferredContext,
    JobSummary,
    LiveTranscript,
    NewCompaction,
    SessionActivity,
    StoredBacklogItem,
)
from clawbot.subagents.records import ChildRun, InjectionWrite


class Sessions(Protocol):
    """Sessions: one per chat (and thread), with the agent and settings it uses."""

    async def get(self, key: str) -> Session | None: ...

    async def create(self, session: Session) -> Session:
        """Insert the session unless it exists; return what is stored."""
        ...

    async def save(self, session: Session) -> None:
        """Persist a session's mutable fields (agent, model override, deliver, epoch, meta)."""
        ...

    async def keys(self) -> list[str]:
        """Every session's key, oldest first."""
        ...

    async def children(self, key: str) -> list[Session]:
        """The sessions ``key`` owns (their ``owner_key`` is ``key``), oldest first."""
        ...

    async def child_keys(self, key: str) -> list[str]:
        """The keys of the sessions ``key`` owns, oldest first."""
        ...

    async def owners(self) -> list[str]:
        """The keys of the sessions that own at least one session, in the order of their
        first child."""
        ...


class Transcripts(Protocol):
    """Each session's transcript, by epoch; only ever appended to (a compaction marks
    the entries it summarized; ``load`` still returns them, marked)."""

    async def load(self, key: str, epoch: int, limit: int | None = None) -> list[TranscriptEntry]:
        """The session's entries of this epoch in order; the last ``limit`` when given."""
        ...

    async def count(self, key: str, epoch: int | None = None) -> int:
        """Messages stored for a session: in one epoch when given, else all."""
        ...

    async def live(self, key: str, epoch: int, limit: int | None = None) -> LiveTranscript:
        """What the model sees of an epoch: the latest compaction's summary and the
        entries no compaction summarized (the last ``limit`` when given)."""
        ...

    async def compact(self, key: str, epoch: int, compaction: NewCompaction) -> int:
        """Store a compaction and mark the live entries it summarizes; how many."""
        ...

    async def append(self, session: Session, entries: Sequence[TranscriptEntry]) -> None: ...

    async def append_context(
        self, session: Session, entry: TranscriptEntry, *, dedup_id: str | None = None
    ) -> bool:
        """Store a message that starts no turn; False for a redelivered ``dedup_id``."""
        ...


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

    async def open(self) -> list[TurnJob]:
        """Every queued or running job, oldest first: the work to recover at start-up."""
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


class Access(Protocol):
    """The senders the owner approved."""

    async def is_approved_sender(self, channel: str, sender_id: str) -> bool: ...


class Pairing(Protocol):
    """DM pairing requests: created for unknown senders, decided by the owner."""

    async def request(
        self,
        *,
        channel: str,
        sender_id: str,
        sender_name: str,
        chat_id: str,
        now: datetime,
        expires_at: datetime,
        max_pending: int,
        new_code: Callable[[], str],
    ) -> PairingRequest | None:
        """The sender's pending request, created if needed; None when the channel already
        has ``max_pending`` waiting."""
        ...

    async def get(self, channel: str, code: str) -> PairingRequest | None: ...

    async def pending(self, now: datetime) -> list[PairingRequest]:
        """Requests still waiting for the owner, oldest first."""
        ...

    async def decide(self, channel: str, code: str, *, approve: bool, now: datetime) -> bool:
        """Approve (remembering the sender) or reject a pending request; False when there
        was no such request."""
        ...


class Agents(Protocol):
    """The stored agent profiles."""

    async def list(self) -> builtins.list[AgentRecord]: ...

    async def save(self, record: AgentRecord) -> None:
        """Insert or replace one agent profile."""
        ...


class Injections(Protocol):
    """Messages sessions put into each other, stored once by idempotency key, and the
    announces child turns owe their parents (marked in the transaction that writes them)."""

    async def submit(
        self,
        session: Session,
        job: TurnJob,
        *,
        injection: InjectionWrite,
        entry: TranscriptEntry | None = None,
        item: BacklogItem | None = None,
        replied: Sequence[str] = (),
    ) -> bool:
        """Like ``Jobs.submit`` for an injected message, with its injection row; False,
        writing nothing, for a key stored before or a child job announced before."""
        ...

    async def child_run(self, job_id: str) -> ChildRun | None:
        """A child turn as its announce needs it; None when it owes no announce."""
        ...

    async def unannounced(self) -> builtins.list[ChildRun]:
        """Finished child turns not yet announced, oldest first."""
        ...

    async def drop_announce(self, job_id: str) -> bool:
        """Mark a child turn announced without an announce; False when it was already."""
        ...

    async def turn(
        self, session_key: str, turn_id: str, *, small: bool = False
    ) -> builtins.list[TranscriptEntry]:
        """Every entry of one turn of a session, in order; ``small`` for a session of few
        messages (a child's), read without the hop to the database's thread."""
        ...


class Memories(Protocol):
    """Texts agents keep under a namespaced key (see ``clawbot.memory``), with full-text
    search that ranks the asking session's and agent's memories first."""

    async def put(
        self,
        *,
        namespace: str,
        key: str,
        text: str,
        tags: Sequence[str],
        session_key: str,
        agent_id: str,
    ) -> Memory:
        """Store a memory, replacing the text and tags of one under the same key (it keeps
        its creation time); what is stored now."""
        ...

    async def restore(self, memories: Sequence[Memory]) -> int:
        """Write memories exactly as given (times, session, agent), replacing any under the
        same keys, atomically; how many."""
        ...

    async def get(self, namespace: str, key: str) -> Memory | None: ...

    async def forget(self, namespace: str, key: str) -> bool:
        """Delete one memory; False when there was none."""
        ...

    async def search(self, query: MemoryQuery) -> builtins.list[MemoryHit]:
        """The best matches, best first. Any text is a safe query: its words are searched
        for, never parsed as search syntax; a text without words finds nothing. With
        semantic recall on, ranked by words and meaning (``clawbot.memory.ranking``)."""
        ...

    async def reindex(self) -> int | None:
        """Embed every memory again for semantic recall; how many, or None when it is off.
        An EmbeddingError when its model fails."""
        ...

    async def written_in(
        self, session_key: str, namespaces: Sequence[str] | None, limit: int
    ) -> builtins.list[Memory]:
        """The memories last written in one session (in these namespaces), newest first."""
        ...

    async def list(self, namespace: str | None = None) -> builtins.list[Memory]:
        """Every memory (of one namespace when given), by namespace and key."""
        ...

    async def count(self) -> int: ...


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

    async def all(self) -> list[AuditRecord]:
        """Every record, oldest first (for an export)."""
        ...


class Store(Protocol):
    """Everything that must survive a restart, by repository, and the store's lifecycle."""

    @property
    def sessions(self) -> Sessions: ...
    @property
    def transcripts(self) -> Transcripts: ...
    @property
    def jobs(self) -> Jobs: ...
    @property
    def backlog(self) -> Backlog: ...
    @property
    def ledger(self) -> Ledger: ...
    @property
    def access(self) -> Access: ...
    @property
    def pairing(self) -> Pairing: ...
    @property
    def agents(self) -> Agents: ...
    @property
    def injections(self) -> Injections: ...
    @property
    def memories(self) -> Memories: ...
    @property
    def audit(self) -> AuditLog: ...
    @property
    def approvals(self) -> Approvals: ...

    @property
    def owner(self) -> str:
        """Who holds the leases of the jobs this process runs (host, pid, a per-open tag)."""
        ...

    async def flush(self) -> None:
        """Make everything accepted so far visible to other processes now."""
        ...

    async def close(self) -> None: ...

    async def check_writable(self) -> None:
        """Raise the store's clear StoreError now if it cannot be written, so a serving
        process refuses to start instead of taking messages it cannot keep."""
        ...

    async def check_intact(self) -> None:
        """Raise the store's clear StoreError now if the database is damaged, so a serving
        process refuses to start instead of answering every message with the error."""
        ...

    async def schema_version(self) -> int: ...

    def note_replied(self, job_id: str) -> None:
        """Note at once, without waiting, that a job's reply went out, so a crash before
        its mark is stored does not send it again."""
        ...

    async def recover_intakes(self) -> int:
        """Store what processes that died had accepted but not yet stored; how many
        messages were missing."""
        ...
