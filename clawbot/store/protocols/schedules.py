"""The repository of scheduled tasks (docs/schedules.md)."""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import Protocol

from clawbot.schedules.records import ScheduledTask


class Schedules(Protocol):
    """Scheduled tasks: the cap, the due ones, their next times and their runs' outcomes."""

    async def create(self, task: ScheduledTask, *, cap: int) -> bool:
        """Store ``task``; False when its session already holds ``cap`` live tasks."""
        ...

    async def get(self, task_id: str) -> ScheduledTask | None: ...

    async def live(self, session_key: str | None = None) -> builtins.list[ScheduledTask]:
        """Active and paused tasks, of one session or all, soonest first."""
        ...

    async def every(self, limit: int = 500) -> builtins.list[ScheduledTask]:
        """Every task, ended ones too: the live soonest first, then the latest created."""
        ...

    async def cancel(self, task_id: str, session_key: str | None = None) -> ScheduledTask | None:
        """Cancel a live task (only of ``session_key`` when given); None if there is none."""
        ...

    async def due(self, moment: datetime, limit: int = 500) -> builtins.list[ScheduledTask]:
        """Active tasks due at ``moment`` or before, the longest due first."""
        ...

    async def next_due(self) -> datetime | None:
        """The soonest due time of an active task."""
        ...

    async def advance(
        self, task_id: str, due: datetime, next_run: datetime | None, job_id: str | None
    ) -> bool:
        """The run due at ``due`` was claimed: move on to ``next_run`` (None: done)."""
        ...

    async def settle(
        self,
        task_id: str,
        job_id: str | None,
        *,
        failed: bool,
        pause_after: int,
        refused: bool = False,
    ) -> ScheduledTask | None:
        """Count a run's outcome once; pause at ``pause_after`` consecutive failures. A
        run ``refused`` by a spent budget leaves the count as it was."""
        ...

    async def unsettled(self) -> builtins.list[ScheduledTask]:
        """Tasks whose last run's outcome is not counted yet."""
        ...

    async def heartbeat_target(self, agent_id: str) -> str | None:
        """The platform session a person last wrote to with ``agent_id`` active."""
        ...
