"""The futures that wait for jobs' outcomes: one per handle given out, resolved when the turn
carrying the job ends (or at shutdown, as deferred)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from clawbot.scheduling.jobs import TurnJob
from clawbot.scheduling.records import TurnHandle, TurnOutcome


class Outcomes:
    """Keeps the waiters by job id. ``loop`` is the scheduler's cached event loop;
    ``closing`` says whether it is shutting down."""

    def __init__(
        self,
        *,
        loop: Callable[[], asyncio.AbstractEventLoop],
        closing: Callable[[], bool],
    ) -> None:
        self._loop = loop
        self._closing = closing
        self._waiters: dict[str, list[asyncio.Future[TurnOutcome]]] = {}

    def handle_for(self, job: TurnJob) -> TurnHandle:
        future: asyncio.Future[TurnOutcome] = self._loop().create_future()
        if self._closing():  # stored during shutdown: it runs after the restart
            future.set_result(TurnOutcome(job_id=job.id, status="deferred"))
        else:
            self._waiters.setdefault(job.id, []).append(future)
        return TurnHandle(job_id=job.id, session_key=job.session_key, lane=job.lane, future=future)

    def resolve(self, job_id: str, outcome: TurnOutcome) -> None:
        for future in self._waiters.pop(job_id, []):
            if not future.done():
                future.set_result(outcome)

    def carry(self, runner_id: str, job_ids: Sequence[str]) -> None:
        """Jobs merged into another's turn share its outcome."""
        for job_id in job_ids:
            self._waiters.setdefault(runner_id, []).extend(self._waiters.pop(job_id, []))

    def defer_all(self) -> None:
        """Shutting down: every job still awaited resumes after the restart."""
        for job_id in list(self._waiters):
            self.resolve(job_id, TurnOutcome(job_id=job_id, status="deferred"))
