"""The per-session backlog (``backlog``): messages deferred while a turn runs, resume tokens
of turns stopped at a tool boundary, and context messages held back until the running turn
ends (kind ``context``, no job)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clawbot.messages import TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.scheduling.backlog import BacklogItem
from clawbot.store.ledger import first_delivery, ledger_row
from clawbot.store.records import DeferredContext, StoredBacklogItem
from clawbot.store.rows import INSERT_MESSAGE, marks, message_row, now
from clawbot.store.sql import Connection, SqlDatabase


def insert_backlog(db: Connection, key: str, item: BacklogItem, stamp: str) -> None:
    db.execute(
        "INSERT INTO backlog (session_key, job_id, kind, payload_json, created_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (key, item.job_id, item.kind, item.model_dump_json(), stamp),
    )


def drain_backlog(db: Connection, job_ids: Sequence[str]) -> None:
    """Delete the backlog rows of these jobs (they started, or ended)."""
    ids = list(job_ids)
    db.execute(f"DELETE FROM backlog WHERE job_id IN ({marks(ids)})", ids)


class SqlBacklog:
    """The stored backlog: what a restart picks up again."""

    def __init__(self, database: SqlDatabase) -> None:
        self._database = database

    async def items(self, session_key: str | None = None) -> list[StoredBacklogItem]:
        """The stored backlog items (not held-back context), oldest first; of one session if
        given."""
        sql = "SELECT session_key, payload_json FROM backlog WHERE kind != 'context'"
        params: tuple[Any, ...] = ()
        if session_key is not None:
            sql += " AND session_key = ?"
            params = (session_key,)
        rows = await self._database.fetchall(sql + " ORDER BY id", params)
        return [
            StoredBacklogItem(key, BacklogItem.model_validate_json(payload))
            for key, payload in rows
        ]

    async def defer_context(
        self, session: Session, entry: TranscriptEntry, *, dedup_id: str | None = None
    ) -> int | None:
        """Hold a context message (one that starts no turn) back until the session's running
        turn ends, durably; its row id, or None for a redelivered message."""
        stamp = now()

        def defer(db: Connection) -> int | None:
            if dedup_id is not None and not first_delivery(
                db, ledger_row(session, dedup_id, stamp)
            ):
                return None
            return db.execute(
                "INSERT INTO backlog (session_key, job_id, kind, payload_json, created_at)"
                " VALUES (?, NULL, 'context', ?, ?)",
                (session.key, entry.model_dump_json(), stamp),
            ).lastrowid

        return await self._database.transaction(defer)

    async def record_context(
        self, session: Session, rows: Sequence[int], entries: Sequence[TranscriptEntry]
    ) -> None:
        """Move held-back context messages into the transcript."""
        ids = list(rows)
        values = [message_row(session.key, session.epoch, e) for e in entries]

        def record(db: Connection) -> None:
            db.executemany(INSERT_MESSAGE, values)
            db.execute(f"DELETE FROM backlog WHERE id IN ({marks(ids)})", ids)

        await self._database.transaction(record)

    async def deferred_context(self) -> list[DeferredContext]:
        """Every held-back context message, oldest first."""
        rows = await self._database.fetchall(
            "SELECT id, session_key, payload_json FROM backlog WHERE kind = 'context' ORDER BY id"
        )
        return [
            DeferredContext(row_id, key, TranscriptEntry.model_validate_json(payload))
            for row_id, key, payload in rows
        ]
