"""The repositories of conversations: sessions, one per chat (and thread), and each
session's transcript."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from clawbot.messages import TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.store.records import LiveTranscript, NewCompaction, OpenedSession, StoredEntry


class Sessions(Protocol):
    """Sessions: one per chat (and thread), with the agent and settings it uses."""

    async def get(self, key: str) -> Session | None: ...

    async def create(self, session: Session) -> Session:
        """Insert the session unless it exists; return what is stored."""
        ...

    async def open(self, session: Session) -> OpenedSession:
        """The stored session of ``session.key``, created from ``session`` when there was
        none, and whether it was created now (what a chat's message needs first)."""
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

    async def page(
        self, key: str, epoch: int, *, before: int | None = None, limit: int = 100
    ) -> list[StoredEntry]:
        """Up to ``limit`` entries of an epoch with their row ids, oldest first: the latest,
        or the latest before row ``before`` (a long transcript read a page at a time)."""
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
