"""Audit records (``audit``): one row per tool call, written as it starts and completed as
it ends, with group commit (a round's calls share commits)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from clawbot.security.audit import AuditKind, AuditRecord, AuditStatus
from clawbot.store.database import Database

_COLUMNS = (
    "id, kind, trace_id, task_id, run_id, step_id, session_key, agent_id, tool,"
    " arguments_json, requested_json, granted_json, approval_required, approval_result,"
    " started_at, ended_at, status, error"
)
_INSERT = (
    "INSERT INTO audit (kind, trace_id, task_id, run_id, step_id, session_key, agent_id, tool,"
    " arguments_json, requested_json, granted_json, approval_required, approval_result,"
    " started_at, ended_at, status, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
    " ?, ?)"
)
_END = (
    "UPDATE audit SET status = ?, error = ?, ended_at = ?, granted_json = ?,"
    " approval_required = ?, approval_result = ? WHERE id = ?"
)


def _record(row: Sequence[Any]) -> AuditRecord:
    (
        record_id,
        kind,
        trace_id,
        task_id,
        run_id,
        step_id,
        session_key,
        agent_id,
        tool,
        arguments,
        requested,
        granted,
        approval_required,
        approval_result,
        started_at,
        ended_at,
        status,
        error,
    ) = row
    return AuditRecord(
        id=record_id,
        kind=cast(AuditKind, kind),
        trace_id=trace_id,
        task_id=task_id,
        run_id=run_id,
        step_id=step_id,
        session_key=session_key,
        agent_id=agent_id,
        tool=tool,
        arguments=json.loads(arguments),
        requested=tuple(json.loads(requested)),
        granted=tuple(json.loads(granted)),
        approval_required=bool(approval_required),
        approval_result=approval_result,
        started_at=datetime.fromisoformat(started_at),
        ended_at=datetime.fromisoformat(ended_at) if ended_at else None,
        status=cast(AuditStatus, status),
        error=error,
    )


class SqliteAuditLog:
    def __init__(self, database: Database) -> None:
        self._database = database

    async def started(self, record: AuditRecord) -> int:
        params = (
            record.kind,
            record.trace_id,
            record.task_id,
            record.run_id,
            record.step_id,
            record.session_key,
            record.agent_id,
            record.tool,
            json.dumps(record.arguments, ensure_ascii=False, default=str),
            json.dumps(list(record.requested)),
            json.dumps(list(record.granted)),
            int(record.approval_required),
            record.approval_result,
            record.started_at.isoformat(),
            record.ended_at.isoformat() if record.ended_at else None,
            record.status,
            record.error,
        )

        def insert(db: sqlite3.Connection) -> int:
            row_id = db.execute(_INSERT, params).lastrowid
            assert row_id is not None
            return row_id

        return await self._database.grouped(insert)

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
        params = (
            status,
            error,
            ended_at.isoformat(),
            json.dumps(list(granted)),
            int(approval_required),
            approval_result,
            record_id,
        )
        await self._database.grouped(lambda db: db.execute(_END, params))

    async def tail(self, limit: int, *, after: int = 0) -> list[AuditRecord]:
        rows = await self._database.fetchall(
            f"SELECT {_COLUMNS} FROM (SELECT {_COLUMNS} FROM audit WHERE id > ?"
            " ORDER BY id DESC LIMIT ?) ORDER BY id",
            (after, limit),
        )
        return [_record(row) for row in rows]

    async def trace(self, trace_id: str) -> list[AuditRecord]:
        rows = await self._database.fetchall(
            f"SELECT {_COLUMNS} FROM audit WHERE trace_id = ? ORDER BY id", (trace_id,)
        )
        return [_record(row) for row in rows]

    async def of_runs(self, run_ids: Sequence[str]) -> list[AuditRecord]:
        """Every record of these runs (turns), in order."""
        runs = list(dict.fromkeys(run_ids))
        if not runs:
            return []
        marks = ", ".join("?" * len(runs))
        rows = await self._database.fetchall(
            f"SELECT {_COLUMNS} FROM audit WHERE run_id IN ({marks}) ORDER BY id", runs
        )
        return [_record(row) for row in rows]

    async def all(self) -> list[AuditRecord]:
        rows = await self._database.fetchall(f"SELECT {_COLUMNS} FROM audit ORDER BY id")
        return [_record(row) for row in rows]
