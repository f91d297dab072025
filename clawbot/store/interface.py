"""What the rest of clawbot may ask of the store: the :class:`Store` that holds one small
repository per family of tables (their protocols are in ``clawbot.store.protocols``, a
module per family). Core code annotates with these protocols only, so another backend
(PostgreSQL, say) can stand in for ``SqliteStore`` without a change there. Nothing here
names SQLite."""

from __future__ import annotations

from typing import Protocol

from clawbot.store.protocols.agents import Agents, Injections
from clawbot.store.protocols.console import Console
from clawbot.store.protocols.conversations import Sessions, Transcripts
from clawbot.store.protocols.memories import Memories
from clawbot.store.protocols.owners import SessionOwners
from clawbot.store.protocols.schedules import Schedules
from clawbot.store.protocols.security import Approvals, AuditLog
from clawbot.store.protocols.senders import Access, Pairing
from clawbot.store.protocols.turns import Backlog, Jobs, Ledger
from clawbot.store.protocols.usage import UsageLedger


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
    def usage(self) -> UsageLedger: ...
    @property
    def console(self) -> Console: ...
    @property
    def schedules(self) -> Schedules: ...

    @property
    def owners(self) -> SessionOwners:
        """Which process runs which session's turns (several only on PostgreSQL)."""
        ...

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
