"""The repositories of agents: their stored profiles, and the messages their sessions
put into each other (with the announces child turns owe their parents)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Protocol

from clawbot.agents.profiles import AgentRecord
from clawbot.messages import TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.scheduling.backlog import BacklogItem
from clawbot.scheduling.jobs import TurnJob
from clawbot.subagents.records import ChildRun, InjectionWrite


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
