"""Injections (``injections``): the messages sessions put into each other, each stored once
under its idempotency key with the job it starts, and the announces child turns owe their
parents. The announce of a child turn is marked in the same transaction that writes it
into the parent, which is what makes it exactly once across crashes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from clawbot.messages import Provenance, TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.scheduling.backlog import BacklogItem
from clawbot.scheduling.jobs import TurnJob
from clawbot.store.backlog import insert_backlog
from clawbot.store.rows import (
    INSERT_JOB,
    INSERT_MESSAGE,
    JobRow,
    blocks,
    mark_replied,
    message_row,
    now,
)
from clawbot.store.sql import Connection, SqlDatabase
from clawbot.subagents.records import ChildRun, InjectionWrite

_FINISHED = "('done', 'failed', 'cancelled')"
_RUN_COLUMNS = (
    "i.job_id, i.target_key, i.parent_key, j.status, j.error, j.started_at, j.finished_at,"
    " i.announced_at, j.merged_into"
)
_MARK_ANNOUNCED = (
    "UPDATE injections SET announced_at = ? WHERE parent_key IS NOT NULL"
    " AND announced_at IS NULL"
    " AND (job_id = ? OR job_id IN (SELECT id FROM turn_jobs WHERE merged_into = ?))"
)


def _parse(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _run(row: Sequence[Any]) -> ChildRun:
    job_id, child, parent, status, error, started, finished, announced, merged = row
    return ChildRun(
        job_id=job_id,
        child_key=child,
        parent_key=parent,
        status=status,
        error=error,
        started_at=_parse(started),
        finished_at=_parse(finished),
        announced=announced is not None,
        merged_into=merged,
    )


class SqlInjections:
    """Injections and the announces they owe."""

    def __init__(self, database: SqlDatabase) -> None:
        self._database = database

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
        """Persist an injected message (its transcript ``entry``, or backlog ``item`` for a
        busy session) with its job and its injection row, in one transaction. False,
        writing nothing, when the idempotency key was stored before, or when the child
        job an announce reports was announced already."""
        stamp = now()
        lease = job.lease_until.astimezone(UTC).isoformat() if job.lease_until else None
        job_row = JobRow(
            job.id,
            session.key,
            job.lane,
            job.status,
            job.attempts,
            job.owner,
            lease,
            job.reply_to,
            stamp if job.status == "running" else None,
            stamp,
            stamp,
        )
        message = message_row(session.key, session.epoch, entry) if entry is not None else None

        def submit(db: Connection) -> bool:
            seen = db.execute("SELECT 1 FROM injections WHERE key = ?", (injection.key,))
            if seen.fetchone() is not None:
                return False
            if injection.announces:
                reported = tuple(dict.fromkeys(injection.announces))
                (owed,) = db.execute(
                    "SELECT count(DISTINCT job_id) FROM injections WHERE parent_key IS NOT NULL"
                    f" AND announced_at IS NULL AND job_id IN ({', '.join('?' * len(reported))})",
                    reported,
                ).fetchone()
                if owed < len(reported):  # one was reported before (or never owed): write nothing
                    return False
                for job_id in reported:
                    db.execute(_MARK_ANNOUNCED, (stamp, job_id, job_id))
            db.execute(
                "INSERT INTO injections (key, kind, source_key, target_key, job_id, hop,"
                " parent_key, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    injection.key,
                    injection.kind,
                    injection.source_key,
                    session.key,
                    job.id,
                    injection.hop,
                    injection.parent_key,
                    stamp,
                ),
            )
            input_id = None
            if message is not None and item is None:
                input_id = db.execute(INSERT_MESSAGE, message).lastrowid
            db.execute(INSERT_JOB, (*job_row, input_id, None, None, None, 0))
            if item is not None:
                insert_backlog(db, session.key, item, stamp)
            mark_replied(db, replied)
            return True

        return await self._database.grouped(submit)

    async def child_run(self, job_id: str) -> ChildRun | None:
        """The child turn ``job_id`` as its announce needs it; None when it owes none."""
        row = await self._database.fetchone(
            f"SELECT {_RUN_COLUMNS} FROM injections i JOIN turn_jobs j ON j.id = i.job_id"
            " WHERE i.job_id = ? AND i.parent_key IS NOT NULL",
            (job_id,),
            small=True,
        )
        return _run(row) if row is not None else None

    async def unannounced(self) -> list[ChildRun]:
        """Finished child turns whose announce was never written (a crash came between),
        oldest first: what start-up recovery announces."""
        rows = await self._database.fetchall(
            f"SELECT {_RUN_COLUMNS} FROM injections i JOIN turn_jobs j ON j.id = i.job_id"
            " WHERE i.parent_key IS NOT NULL AND i.announced_at IS NULL"
            f" AND j.merged_into IS NULL AND j.status IN {_FINISHED}"
            " ORDER BY j.finished_at, j.id"
        )
        return [_run(row) for row in rows]

    async def drop_announce(self, job_id: str) -> bool:
        """Mark a child turn announced without writing an announce (it was refused, e.g.
        past the hop limit), so no restart tries again; False when it was announced."""
        stamp = now()
        changed = await self._database.write(_MARK_ANNOUNCED, (stamp, job_id, job_id))
        return changed > 0

    async def turn(
        self, session_key: str, turn_id: str, *, small: bool = False
    ) -> list[TranscriptEntry]:
        """Every entry of one turn of a session, in order (its input included). ``small``:
        the session is a child's, whose few messages are read right here on the loop when
        the database's thread is idle (see ``Database.fetchall``)."""
        rows = await self._database.fetchall(
            "SELECT role, content_json, provenance_json, meta_json, created_at FROM messages"
            " WHERE session_key = ? AND turn_id = ? ORDER BY id",
            (session_key, turn_id),
            small=small,
        )
        return [
            TranscriptEntry(
                role=role,
                content=blocks.validate_json(content_json),
                provenance=Provenance.model_validate_json(provenance_json),
                meta=json.loads(meta_json),
                turn_id=turn_id,
                created_at=datetime.fromisoformat(created_at),
            )
            for role, content_json, provenance_json, meta_json, created_at in rows
        ]
