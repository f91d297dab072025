"""What the scheduler hands out: a stored message's handle and the outcome of its turn, and
what ``/queue`` and ``/stop`` report. Immutable, so callers can keep them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal, NamedTuple

from clawbot.channels.outbox import Delivery
from clawbot.runtime.control import TurnResult
from clawbot.scheduling.backlog import BacklogItem
from clawbot.scheduling.jobs import Lane

RunKind = Literal["message", "steered", "backlog", "recovered"]
OutcomeStatus = Literal["done", "failed", "cancelled", "deferred"]


class TurnOutcome(NamedTuple):
    """How the turn carrying a job ended. ``deferred``: the process is shutting down and the
    job resumes after the restart, or (``elsewhere``: that process's id) the session's turns
    run in another process, which took the message over and answers it there. A named
    tuple, as :class:`TurnHandle`."""

    job_id: str
    status: OutcomeStatus
    reply: str | None = None
    delivery: Delivery | None = None
    result: TurnResult | None = None
    elsewhere: str | None = None


class TurnHandle(NamedTuple):
    """A stored, queued message: its job, and the outcome of the turn that answers it.
    A named tuple: one is built for every message, and a frozen dataclass sets each field
    through ``object.__setattr__`` (about 1,300 instructions a field)."""

    job_id: str
    session_key: str
    lane: Lane
    future: asyncio.Future[TurnOutcome]

    async def outcome(self) -> TurnOutcome:
        return await self.future


@dataclass(frozen=True)
class ActiveTurn:
    job_id: str
    lane: Lane
    kind: RunKind
    seconds: float


@dataclass(frozen=True)
class QueueState:
    """A session's scheduling state, for ``/queue``."""

    session_key: str
    active: ActiveTurn | None
    backlog: tuple[BacklogItem, ...]
    queued: int
    waiting_lane: Lane | None


@dataclass(frozen=True)
class StopReport:
    """What ``/stop`` did: the turn it cancelled, resume tokens dropped, messages still due."""

    stopped: str | None
    dropped: int
    waiting: int
    elsewhere: bool = False
    """The session's turns run in another process (several on one database): asked to stop."""
