"""Scheduled tasks (``scheduled_tasks``): created under a per-session cap, listed, cancelled,
found when due, moved on to their next due time once a run is claimed, and their runs'
outcomes counted (a task that keeps failing is paused)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from clawbot.schedules.records import ScheduledTask
from clawbot.store.rows import now
from clawbot.store.sql import Connection, SqlDatabase

_COLUMNS = (
    "id, session_key, agent_id, kind, spec, tz, prompt, status, next_run, created_by, mode,"
    " failures, last_job, last_run, created_at"
)
_LIVE = "status IN ('active', 'paused')"


def stamp(moment: datetime) -> str:
    """A time as this table stores it: UTC, always with microseconds, so text order is time
    order."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _parse(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _task(row: Sequence[Any]) -> ScheduledTask:
    (
        id_,
        session_key,
        agent_id,
        kind,
        spec,
        tz,
        prompt,
        status,
        next_run,
        created_by,
        mode,
        failures,
        last_job,
        last_run,
        created_at,
    ) = row
    return ScheduledTask(
        id=id_,
        session_key=session_key,
        agent_id=agent_id,
        kind=kind,
        spec=spec,
        tz=tz,
        prompt=prompt,
        status=status,
        next_run=_parse(next_run),
        created_by=created_by,
        mode=mode,
        failures=int(failures),
        last_job=last_job,
        last_run=_parse(last_run),
        created_at=_parse(created_at),
    )


class SqlSchedules:
    """The scheduled tasks."""

    def __init__(self, database: SqlDatabase) -> None:
        self._database = database

    async def create(self, task: ScheduledTask, *, cap: int) -> bool:
        """Store ``task`` unless its session already holds ``cap`` live tasks (active or
        paused): counted and inserted in one transaction, so two at once cannot pass it."""
        written = now()

        def create(db: Connection) -> bool:
            (held,) = db.execute(
                f"SELECT count(*) FROM scheduled_tasks WHERE session_key = ? AND {_LIVE}",
                (task.session_key,),
            ).fetchone()
            if held >= cap:
                return False
            db.execute(
                f"INSERT INTO scheduled_tasks ({_COLUMNS}, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    task.id,
                    task.session_key,
                    task.agent_id,
                    task.kind,
                    task.spec,
                    task.tz,
                    task.prompt,
                    task.status,
                    stamp(task.next_run) if task.next_run else None,
                    task.created_by,
                    task.mode,
                    0,
                    None,
                    None,
                    written,
                    written,
                ),
            )
            return True

        return await self._database.transaction(create)

    async def get(self, task_id: str) -> ScheduledTask | None:
        row = await self._database.fetchone(
            f"SELECT {_COLUMNS} FROM scheduled_tasks WHERE id = ?", (task_id,), small=True
        )
        return _task(row) if row is not None else None

    async def live(self, session_key: str | None = None) -> builtins.list[ScheduledTask]:
        """The active and paused tasks, of one session or of all, soonest first."""
        where = f"{_LIVE} AND session_key = ?" if session_key is not None else _LIVE
        rows = await self._database.fetchall(
            f"SELECT {_COLUMNS} FROM scheduled_tasks WHERE {where}"
            " ORDER BY next_run IS NULL, next_run, created_at",
            (session_key,) if session_key is not None else (),
        )
        return [_task(row) for row in rows]

    async def every(self, limit: int = 500) -> builtins.list[ScheduledTask]:
        """Every task, ended ones too (the console lists them): the live soonest first,
        then the rest latest created first."""
        rows = await self._database.fetchall(
            f"SELECT {_COLUMNS} FROM scheduled_tasks"
            f" ORDER BY CASE WHEN {_LIVE} THEN 0 ELSE 1 END, next_run IS NULL, next_run,"
            " created_at DESC LIMIT ?",
            (limit,),
        )
        return [_task(row) for row in rows]

    async def cancel(self, task_id: str, session_key: str | None = None) -> ScheduledTask | None:
        """Cancel a live task (of ``session_key`` only, when given); the task as it was, or
        None when there is no such live task."""

        def cancel(db: Connection) -> ScheduledTask | None:
            row = db.execute(
                f"SELECT {_COLUMNS} FROM scheduled_tasks WHERE id = ? AND {_LIVE}", (task_id,)
            ).fetchone()
            if row is None:
                return None
            task = _task(row)
            if session_key is not None and task.session_key != session_key:
                return None
            db.execute(
                "UPDATE scheduled_tasks SET status = 'cancelled', next_run = NULL,"
                " updated_at = ? WHERE id = ?",
                (now(), task_id),
            )
            return task

        return await self._database.transaction(cancel)

    async def due(self, moment: datetime, limit: int = 500) -> builtins.list[ScheduledTask]:
        """Active tasks due at ``moment`` or before, the longest due first."""
        rows = await self._database.fetchall(
            f"SELECT {_COLUMNS} FROM scheduled_tasks WHERE status = 'active'"
            " AND next_run <= ? ORDER BY next_run LIMIT ?",
            (stamp(moment), limit),
        )
        return [_task(row) for row in rows]

    async def next_due(self) -> datetime | None:
        """The soonest due time of an active task (one step of the index)."""
        row = await self._database.fetchone(
            "SELECT min(next_run) FROM scheduled_tasks WHERE status = 'active'", small=True
        )
        if row is None:
            return None
        (earliest,) = row
        return _parse(earliest)

    async def advance(
        self, task_id: str, due: datetime, next_run: datetime | None, job_id: str | None
    ) -> bool:
        """The run due at ``due`` was claimed (by ``job_id``, None when an earlier attempt
        claimed it): move the task on to ``next_run`` (None: a one-off, now done). False
        when the task no longer waits for that due time (cancelled meanwhile)."""
        written = now()
        changed = await self._database.write(
            "UPDATE scheduled_tasks SET next_run = ?,"
            " status = CASE WHEN ? IS NULL THEN 'done' ELSE status END,"
            " last_job = coalesce(?, last_job), last_run = ?, updated_at = ?"
            " WHERE id = ? AND status = 'active' AND next_run = ?",
            (
                stamp(next_run) if next_run else None,
                stamp(next_run) if next_run else None,
                job_id,
                stamp(due),
                written,
                task_id,
                stamp(due),
            ),
        )
        return changed == 1

    async def settle(
        self,
        task_id: str,
        job_id: str | None,
        *,
        failed: bool,
        pause_after: int,
        refused: bool = False,
    ) -> ScheduledTask | None:
        """Count the outcome of the task's run ``job_id`` (once: the first caller wins; None
        for a run that got no job at all, its subagent refused): a failure adds one to the
        consecutive failures, a success clears them, a run ``refused`` by a spent budget
        (no fault of the task's) leaves them; at ``pause_after`` failures an active task is
        paused. The task as it now is, or None when this outcome was counted before."""

        def settle(db: Connection) -> ScheduledTask | None:
            which = "last_job = ?" if job_id is not None else "? IS NULL"
            changed = db.execute(
                "UPDATE scheduled_tasks SET last_job = NULL, failures = CASE WHEN ? THEN"
                " failures WHEN ? THEN failures + 1 ELSE 0 END, updated_at = ?"
                f" WHERE id = ? AND {which}",
                (refused, failed, now(), task_id, job_id),
            ).rowcount
            if not changed:
                return None
            db.execute(
                "UPDATE scheduled_tasks SET status = 'paused', updated_at = ?"
                " WHERE id = ? AND status = 'active' AND failures >= ?",
                (now(), task_id, pause_after),
            )
            row = db.execute(
                f"SELECT {_COLUMNS} FROM scheduled_tasks WHERE id = ?", (task_id,)
            ).fetchone()
            return _task(row) if row is not None else None

        return await self._database.transaction(settle)

    async def unsettled(self) -> builtins.list[ScheduledTask]:
        """Tasks whose last run's outcome is not counted yet (a restart picks them up)."""
        rows = await self._database.fetchall(
            f"SELECT {_COLUMNS} FROM scheduled_tasks WHERE last_job IS NOT NULL"
        )
        return [_task(row) for row in rows]

    async def heartbeat_target(self, agent_id: str) -> str | None:
        """The chat a person last wrote to with ``agent_id`` active: the key of the
        session of the newest ``main`` lane job among the platform sessions (not internal
        ones, not subagents) whose agent it is; read from the newest job backwards (job ids
        are time-ordered, and the table is clustered on them)."""
        row = await self._database.fetchone(
            "SELECT j.session_key FROM turn_jobs j JOIN sessions s ON s.key = j.session_key"
            " WHERE j.lane = 'main' AND s.agent_id = ? AND s.channel != 'internal'"
            " AND s.owner_key IS NULL ORDER BY j.id DESC LIMIT 1",
            (agent_id,),
        )
        if row is None:
            return None
        (key,) = row
        return str(key)
