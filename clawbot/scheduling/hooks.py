"""What the scheduler calls back when a child session's turn ends: the announce to its
parent. The subagents package implements it and binds it at assembly, so scheduling never
imports that package."""

from __future__ import annotations

from typing import Protocol

from clawbot.routing.sessions import Session


class TurnEnds(Protocol):
    async def turn_ended(self, session: Session, job_id: str) -> None:
        """A turn of a child session ended (done, failed, timed out or stopped)."""
        ...

    async def recover(self) -> None:
        """At start-up, after the scheduler's own recovery: report the child turns that
        ended before a crash without being reported."""
        ...
