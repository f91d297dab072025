"""Sessions (``sessions``) and their transcripts (``messages``). Transcripts are only ever
appended to; ``/new`` starts a new epoch instead of deleting history, and a compaction
(``compactions``) marks the messages it summarized instead of deleting them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from clawbot.messages import Provenance, TranscriptEntry
from clawbot.redaction import redactor
from clawbot.routing.sessions import Session
from clawbot.store.ledger import first_delivery, ledger_row
from clawbot.store.records import (
    COMPACTED_META,
    LiveTranscript,
    NewCompaction,
    OpenedSession,
    StoredEntry,
)
from clawbot.store.rows import INSERT_MESSAGE, blocks, message_row, now
from clawbot.store.sql import Connection, SqlDatabase

_SESSION_COLUMNS = (
    "key, channel, chat_id, thread_id, chat_type, agent_id, model_override, deliver,"
    " owner_key, epoch, meta_json"
)


class SqlSessions:
    """Sessions: one per chat (and thread), with the agent and settings it uses."""

    def __init__(self, database: SqlDatabase) -> None:
        self._database = database

    async def get(self, key: str) -> Session | None:
        row = await self._database.fetchone(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE key = ?",
            (key,),
            small=True,
            flush=False,
        )
        return None if row is None else _session(row)

    async def create(self, session: Session) -> Session:
        """Insert the session unless it exists; return what is stored."""
        if await self._insert(session):
            return session
        stored = await self.get(session.key)
        assert stored is not None
        return stored

    async def open(self, session: Session) -> OpenedSession:
        """The stored session of ``session.key``, created from ``session`` when there was
        none, and whether it was created now."""
        stored = await self.get(session.key)
        if stored is not None:
            return OpenedSession(stored, created=False)
        if await self._insert(session):
            return OpenedSession(session, created=True)
        stored = await self.get(session.key)  # created elsewhere this very moment
        assert stored is not None
        return OpenedSession(stored, created=False)

    async def _insert(self, session: Session) -> bool:
        """Insert the session unless its key exists; whether it was inserted."""
        return bool(
            await self._database.write(
                f"INSERT OR IGNORE INTO sessions ({_SESSION_COLUMNS}, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                session_row(session, now()),
            )
        )

    async def save(self, session: Session) -> None:
        """Persist a session's mutable fields (agent, model override, deliver, epoch, meta)."""
        await self._database.write(
            "UPDATE sessions SET agent_id = ?, model_override = ?, deliver = ?, epoch = ?,"
            " meta_json = ?, updated_at = ? WHERE key = ?",
            (
                session.agent_id,
                session.model_override,
                int(session.deliver),
                session.epoch,
                json.dumps(session.meta),
                now(),
                session.key,
            ),
        )

    async def keys(self) -> list[str]:
        """Every session's key, oldest first."""
        rows = await self._database.fetchall("SELECT key FROM sessions ORDER BY created_at")
        return [key for (key,) in rows]

    async def children(self, key: str) -> list[Session]:
        """The sessions ``key`` owns (its subagents), oldest first."""
        rows = await self._database.fetchall(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE owner_key = ? ORDER BY created_at, key",
            (key,),
        )
        return [_session(row) for row in rows]

    async def child_keys(self, key: str) -> list[str]:
        """The keys of the sessions ``key`` owns, oldest first: for counting and checks that
        need no more of them (a spawn counts its running siblings by key)."""
        rows = await self._database.fetchall(
            "SELECT key FROM sessions WHERE owner_key = ? ORDER BY created_at, key", (key,)
        )
        return [child for (child,) in rows]

    async def owners(self) -> list[str]:
        """The keys of the sessions that own at least one session, in the order of their
        first child."""
        rows = await self._database.fetchall(
            "SELECT owner_key, min(created_at) AS first FROM sessions"
            " WHERE owner_key IS NOT NULL GROUP BY owner_key ORDER BY first"
        )
        return [key for key, _ in rows]


_ENTRY_COLUMNS = (
    "role, content_json, provenance_json, meta_json, turn_id, created_at, compaction_id"
)


def _entry(row: Sequence[Any]) -> TranscriptEntry:
    """A ``messages`` row (its ``_ENTRY_COLUMNS``) as a TranscriptEntry; one a compaction
    summarized says so in its meta (``COMPACTED_META``)."""
    role, content_json, provenance_json, meta_json, turn_id, created_at, compaction_id = row
    meta = json.loads(meta_json)
    if compaction_id is not None:
        meta[COMPACTED_META] = int(compaction_id)
    return TranscriptEntry(
        role=role,
        content=blocks.validate_json(content_json),
        provenance=Provenance.model_validate_json(provenance_json),
        meta=meta,
        turn_id=turn_id,
        created_at=datetime.fromisoformat(created_at),
    )


def _stored(row_id: int, *columns: Any) -> StoredEntry:
    """A ``messages`` row of its id and ``_ENTRY_COLUMNS`` as a StoredEntry."""
    return StoredEntry(int(row_id), _entry(columns))


def _session(row: Sequence[Any]) -> Session:
    """A ``sessions`` row (its ``_SESSION_COLUMNS``) as a Session."""
    (
        key,
        channel,
        chat_id,
        thread_id,
        chat_type,
        agent_id,
        model_override,
        deliver,
        owner_key,
        epoch,
        meta_json,
    ) = row
    return Session(
        key=key,
        channel=channel,
        chat_id=chat_id,
        thread_id=thread_id,
        chat_type=chat_type,
        agent_id=agent_id,
        model_override=model_override,
        deliver=bool(deliver),
        owner_key=owner_key,
        epoch=int(epoch),
        meta=json.loads(meta_json),
    )


class SqlTranscripts:
    """Each session's transcript: its entries, by epoch (conversation)."""

    def __init__(self, database: SqlDatabase) -> None:
        self._database = database

    async def load(self, key: str, epoch: int, limit: int | None = None) -> list[TranscriptEntry]:
        """The session's entries of this epoch in order; the last ``limit`` when given."""
        sql = f"SELECT {_ENTRY_COLUMNS} FROM messages WHERE session_key = ? AND epoch = ?"
        rows = await self._entry_rows(sql, (key, epoch), limit)
        return [_entry(row) for row in reversed(rows)]

    async def live(self, key: str, epoch: int, limit: int | None = None) -> LiveTranscript:
        """What the model sees of this epoch: the latest compaction's summary and the
        entries no compaction summarized (the last ``limit`` when given), with row ids."""
        found = await self._database.fetchone(
            "SELECT summary FROM compactions WHERE session_key = ? AND epoch = ?"
            " ORDER BY id DESC LIMIT 1",
            (key, epoch),
            small=True,
        )
        sql = (
            f"SELECT id, {_ENTRY_COLUMNS} FROM messages"
            " WHERE session_key = ? AND epoch = ? AND compaction_id IS NULL"
        )
        rows = await self._entry_rows(sql, (key, epoch), limit)
        summary = None
        if found is not None:
            (text,) = found
            summary = str(text)
        return LiveTranscript(
            summary=summary, entries=tuple(_stored(*row) for row in reversed(rows))
        )

    async def compact(self, key: str, epoch: int, compaction: NewCompaction) -> int:
        """Store ``compaction`` and mark the live entries it summarizes (up to its
        ``through_id``) in one transaction; how many it marked."""
        meta = json.dumps(compaction.meta or {})

        def write(db: Connection) -> int:
            cursor = db.execute(
                "INSERT INTO compactions (session_key, epoch, summary, through_id, messages,"
                " trigger, instructions, model, meta_json, created_at)"
                " VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?, ?)",
                (
                    key,
                    epoch,
                    redactor.redact(compaction.summary),
                    compaction.through_id,
                    compaction.trigger,
                    redactor.redact(compaction.instructions),
                    compaction.model,
                    meta,
                    now(),
                ),
            )
            marked = db.execute(
                "UPDATE messages SET compaction_id = ? WHERE session_key = ? AND epoch = ?"
                " AND id <= ? AND compaction_id IS NULL",
                (cursor.lastrowid, key, epoch, compaction.through_id),
            ).rowcount
            db.execute(
                "UPDATE compactions SET messages = ? WHERE id = ?", (marked, cursor.lastrowid)
            )
            return int(marked)

        return await self._database.transaction(write)

    async def _entry_rows(self, sql: str, params: tuple[Any, ...], limit: int | None) -> list[Any]:
        """The rows of ``sql`` (a query of messages), newest first; the first ``limit``."""
        sql += " ORDER BY id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params = (*params, limit)
        return await self._database.fetchall(sql, params, small=limit is not None)

    async def page(
        self, key: str, epoch: int, *, before: int | None = None, limit: int = 100
    ) -> list[StoredEntry]:
        """Up to ``limit`` entries of an epoch, with their row ids, oldest first: the latest
        ones, or the latest ones before the row ``before`` (the web console's pages)."""
        sql = f"SELECT id, {_ENTRY_COLUMNS} FROM messages WHERE session_key = ? AND epoch = ?"
        params: tuple[Any, ...] = (key, epoch)
        if before is not None:
            sql, params = sql + " AND id < ?", (*params, before)
        rows = await self._entry_rows(sql, params, limit)
        return [_stored(*row) for row in reversed(rows)]

    async def count(self, key: str, epoch: int | None = None) -> int:
        """Messages stored for a session: in one epoch (conversation) when given, else all."""
        sql = "SELECT count(*) FROM messages WHERE session_key = ?"
        params: tuple[Any, ...] = (key,)
        if epoch is not None:
            sql, params = sql + " AND epoch = ?", (key, epoch)
        (count,) = await self._database.fetchone(sql, params)
        return int(count)

    async def append(self, session: Session, entries: Sequence[TranscriptEntry]) -> None:
        await self._database.write_many(
            INSERT_MESSAGE, [message_row(session.key, session.epoch, e) for e in entries]
        )

    async def append_context(
        self, session: Session, entry: TranscriptEntry, *, dedup_id: str | None = None
    ) -> bool:
        """Store a message that starts no turn (group chatter kept as context).

        Like ``jobs.submit``, a redelivered message (same ``dedup_id``) is stored once:
        returns False then.
        """
        stamp = now()
        row = message_row(session.key, session.epoch, entry)

        def write(db: Connection) -> bool:
            if dedup_id is not None and not first_delivery(
                db, ledger_row(session, dedup_id, stamp)
            ):
                return False
            db.execute(INSERT_MESSAGE, row)
            return True

        return await self._database.transaction(write)


def session_row(session: Session, stamp: str) -> tuple[Any, ...]:
    """A Session's ``_SESSION_COLUMNS`` and its ``created_at`` and ``updated_at``."""
    return (
        session.key,
        session.channel,
        session.chat_id,
        session.thread_id,
        session.chat_type,
        session.agent_id,
        session.model_override,
        int(session.deliver),
        session.owner_key,
        session.epoch,
        json.dumps(session.meta),
        stamp,
        stamp,
    )
