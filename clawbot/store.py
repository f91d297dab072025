"""The one SQLite database (aiosqlite, WAL, foreign keys on) behind everything that must
survive a restart. SQL lives here so another backend can replace this module's class.

Writes that precede a reply are committed before the reply is sent. Transcripts are only
ever appended to; ``/new`` starts a new epoch instead of deleting history.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

import aiosqlite
from pydantic import TypeAdapter

from clawbot.agents import AgentRecord, AgentSpec
from clawbot.errors import StoreError
from clawbot.messages import ContentBlock, Provenance, TranscriptEntry
from clawbot.migrations import migrations
from clawbot.pairing import PAIRING_COLUMNS, PairingRequest, stamp
from clawbot.sessions import Session

_blocks = TypeAdapter(tuple[ContentBlock, ...])
T = TypeVar("T")
TurnStatus = Literal["queued", "running", "done", "failed", "cancelled"]


def _now() -> str:
    return datetime.now(UTC).isoformat()


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


def _entry_row(key: str, epoch: int, entry: TranscriptEntry) -> tuple[Any, ...]:
    return (
        key,
        epoch,
        entry.role,
        _blocks.dump_json(entry.content).decode(),
        entry.provenance.model_dump_json(exclude_defaults=True),
        json.dumps(entry.meta) if entry.meta else "{}",
        entry.turn_id,
        entry.created_at.isoformat(),
    )


_INSERT_MESSAGE = (
    "INSERT INTO messages (session_key, epoch, role, content_json, provenance_json, meta_json,"
    " turn_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


class Store:
    """Async access to the database. Open with :meth:`open`, close with :meth:`close`."""

    def __init__(self, conn: aiosqlite.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path

    @classmethod
    async def open(cls, path: Path, *, synchronous: str = "NORMAL") -> Store:
        """Open (creating if needed) and migrate the database; a clear StoreError otherwise."""
        if str(path) != ":memory:":
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the folder for the database {path}: {exc}"
                ) from None
        try:
            conn = await aiosqlite.connect(str(path))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the database {path}: {exc}") from None
        store = cls(conn, path)
        try:
            await store._configure(synchronous)
            await store._migrate()
        except BaseException as exc:
            with contextlib.suppress(Exception):
                await conn.close()
            if isinstance(exc, sqlite3.DatabaseError):
                raise _describe(exc, path) from None
            raise
        return store

    async def _configure(self, synchronous: str) -> None:
        conn = self._conn
        # Reading the schema first turns "file is not a database" into an error here, at open.
        async with conn.execute("SELECT count(*) FROM sqlite_master") as cursor:
            await cursor.fetchall()
        async with conn.execute("PRAGMA journal_mode=WAL") as cursor:
            await cursor.fetchall()
        await conn.execute("PRAGMA foreign_keys=ON")
        await conn.execute(f"PRAGMA synchronous={synchronous}")
        await conn.execute("PRAGMA busy_timeout=5000")

    async def _migrate(self) -> None:
        async with self._conn.execute("PRAGMA user_version") as cursor:
            row = await cursor.fetchone()
        version = int(row[0]) if row else 0
        known = migrations()
        latest = known[-1][0] if known else 0
        if version > latest:
            raise StoreError(
                f"the database {self.path} was written by a newer clawbot (schema {version})",
                hint="upgrade clawbot or point CLAWBOT_HOME at another folder",
            )
        for number, _name, script in known:
            if number <= version:
                continue
            await self._conn.executescript(
                f"BEGIN;\n{script}\nPRAGMA user_version={number};\nCOMMIT;"
            )

    async def close(self) -> None:
        await self._conn.close()

    async def schema_version(self) -> int:
        async with self._conn.execute("PRAGMA user_version") as cursor:
            row = await cursor.fetchone()
        return int(row[0]) if row else 0

    # sessions -------------------------------------------------------------------------

    async def get_session(self, key: str) -> Session | None:
        async with self._conn.execute(
            "SELECT key, channel, chat_id, thread_id, chat_type, agent_id, model_override,"
            " deliver, owner_key, epoch, meta_json FROM sessions WHERE key = ?",
            (key,),
        ) as cursor:
            row = await cursor.fetchone()
        if row is None:
            return None
        return Session(
            key=row[0],
            channel=row[1],
            chat_id=row[2],
            thread_id=row[3],
            chat_type=row[4],
            agent_id=row[5],
            model_override=row[6],
            deliver=bool(row[7]),
            owner_key=row[8],
            epoch=int(row[9]),
            meta=json.loads(row[10]),
        )

    async def create_session(self, session: Session) -> Session:
        """Insert the session unless it exists; return what is stored."""
        now = _now()
        await self._write(
            "INSERT OR IGNORE INTO sessions (key, channel, chat_id, thread_id, chat_type,"
            " agent_id, model_override, deliver, owner_key, epoch, meta_json, created_at,"
            " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
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
                now,
                now,
            ),
        )
        stored = await self.get_session(session.key)
        assert stored is not None
        return stored

    async def save_session(self, session: Session) -> None:
        """Persist a session's mutable fields (agent, model override, deliver, epoch, meta)."""
        await self._write(
            "UPDATE sessions SET agent_id = ?, model_override = ?, deliver = ?, epoch = ?,"
            " meta_json = ?, updated_at = ? WHERE key = ?",
            (
                session.agent_id,
                session.model_override,
                int(session.deliver),
                session.epoch,
                json.dumps(session.meta),
                _now(),
                session.key,
            ),
        )

    async def list_sessions(self) -> list[str]:
        async with self._conn.execute("SELECT key FROM sessions ORDER BY created_at") as cursor:
            return [row[0] async for row in cursor]

    # transcripts ----------------------------------------------------------------------

    async def load_transcript(
        self, key: str, epoch: int, limit: int | None = None
    ) -> list[TranscriptEntry]:
        """The session's entries of this epoch in order; the last ``limit`` when given."""
        sql = (
            "SELECT role, content_json, provenance_json, meta_json, turn_id, created_at"
            " FROM messages WHERE session_key = ? AND epoch = ? ORDER BY id DESC"
        )
        params: tuple[Any, ...] = (key, epoch)
        if limit is not None:
            sql += " LIMIT ?"
            params = (key, epoch, limit)
        async with self._conn.execute(sql, params) as cursor:
            rows = await cursor.fetchall()
        return [
            TranscriptEntry(
                role=row[0],
                content=_blocks.validate_json(row[1]),
                provenance=Provenance.model_validate_json(row[2]),
                meta=json.loads(row[3]),
                turn_id=row[4],
                created_at=datetime.fromisoformat(row[5]),
            )
            for row in reversed(list(rows))
        ]

    async def count_messages(self, key: str) -> int:
        async with self._conn.execute(
            "SELECT count(*) FROM messages WHERE session_key = ?", (key,)
        ) as cursor:
            row = await cursor.fetchone()
        return int(row[0]) if row else 0

    async def append_entries(self, session: Session, entries: Sequence[TranscriptEntry]) -> None:
        await self._write_many(
            _INSERT_MESSAGE, [_entry_row(session.key, session.epoch, e) for e in entries]
        )

    # turns ----------------------------------------------------------------------------

    async def begin_turn(
        self,
        session: Session,
        user_entry: TranscriptEntry,
        *,
        lane: str = "main",
        dedup_id: str | None = None,
    ) -> bool:
        """Persist the inbound entry and its running TurnJob in one transaction.

        With ``dedup_id`` (the platform message id) a redelivered message is recognised and
        nothing is written: returns False.
        """
        assert user_entry.turn_id, "the turn id is assigned before the entry is stored"
        now = _now()
        row = _entry_row(session.key, session.epoch, user_entry)

        def write(db: sqlite3.Connection) -> bool:
            if dedup_id is not None:
                seen = db.execute(
                    "INSERT OR IGNORE INTO inbound_seen (channel, chat_id, message_id,"
                    " session_key, received_at) VALUES (?, ?, ?, ?, ?)",
                    (session.channel, session.chat_id, dedup_id, session.key, now),
                )
                if seen.rowcount != 1:
                    return False
            message_id = db.execute(_INSERT_MESSAGE, row).lastrowid
            db.execute(
                "INSERT INTO turn_jobs (id, session_key, lane, status, attempts, input_message_id,"
                " created_at, updated_at) VALUES (?, ?, ?, 'running', 1, ?, ?, ?)",
                (user_entry.turn_id, session.key, lane, message_id, now, now),
            )
            return True

        return await self.transaction(write)

    async def mark_delivery_failed(self, turn_id: str, error: str) -> None:
        """A reply that could not be delivered leaves a visible mark on its turn."""
        await self._write(
            "UPDATE turn_jobs SET error = ?, updated_at = ? WHERE id = ?",
            (f"delivery failed: {error}", _now(), turn_id),
        )

    async def finish_turn(
        self,
        session: Session,
        job_id: str,
        entries: Iterable[TranscriptEntry],
        *,
        status: TurnStatus = "done",
        error: str | None = None,
    ) -> None:
        """Append the turn's remaining entries and close its job, atomically."""
        rows = [_entry_row(session.key, session.epoch, e) for e in entries]
        now = _now()

        def write(db: sqlite3.Connection) -> None:
            if rows:
                db.executemany(_INSERT_MESSAGE, rows)
            db.execute(
                "UPDATE turn_jobs SET status = ?, error = ?, updated_at = ? WHERE id = ?",
                (status, error, now, job_id),
            )

        await self.transaction(write)

    async def turn_job(self, job_id: str) -> dict[str, Any] | None:
        async with self._conn.execute(
            "SELECT id, session_key, lane, status, attempts, error FROM turn_jobs WHERE id = ?",
            (job_id,),
        ) as cursor:
            row = await cursor.fetchone()
        if row is None:
            return None
        keys = ("id", "session_key", "lane", "status", "attempts", "error")
        return dict(zip(keys, row, strict=True))

    async def turn_jobs_for(self, session_key: str) -> list[dict[str, Any]]:
        async with self._conn.execute(
            "SELECT id, status, error FROM turn_jobs WHERE session_key = ? ORDER BY created_at",
            (session_key,),
        ) as cursor:
            rows = await cursor.fetchall()
        return [{"id": r[0], "status": r[1], "error": r[2]} for r in rows]

    # agents ---------------------------------------------------------------------------

    async def list_agent_specs(self) -> list[AgentRecord]:
        async with self._conn.execute(
            "SELECT config_json, source, file_hash FROM agent_specs ORDER BY agent_id"
        ) as cursor:
            rows = await cursor.fetchall()
        return [
            AgentRecord(spec=AgentSpec.model_validate_json(row[0]), source=row[1], file_hash=row[2])
            for row in rows
        ]

    async def save_agent_spec(self, record: AgentRecord) -> None:
        """Insert or replace one agent profile."""
        now = _now()
        spec = record.spec
        await self._write(
            "INSERT INTO agent_specs (agent_id, name, config_json, source, file_hash,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (agent_id) DO UPDATE SET name = excluded.name,"
            " config_json = excluded.config_json, source = excluded.source,"
            " file_hash = excluded.file_hash, updated_at = excluded.updated_at",
            (
                spec.agent_id,
                spec.name,
                spec.model_dump_json(),
                record.source,
                record.file_hash,
                now,
                now,
            ),
        )

    # access ---------------------------------------------------------------------------

    async def is_approved_sender(self, channel: str, sender_id: str) -> bool:
        async with self._conn.execute(
            "SELECT 1 FROM approved_senders WHERE channel = ? AND sender_id = ?",
            (channel, sender_id),
        ) as cursor:
            return await cursor.fetchone() is not None

    async def request_pairing(
        self,
        *,
        channel: str,
        sender_id: str,
        sender_name: str,
        chat_id: str,
        now: datetime,
        expires_at: datetime,
        max_pending: int,
        new_code: Callable[[], str],
    ) -> PairingRequest | None:
        """The sender's pending pairing request, created if needed; None when the channel
        already has ``max_pending`` requests waiting. One transaction, so concurrent
        messages can neither exceed the cap nor give one sender two codes."""
        at = stamp(now)
        select = (
            f"SELECT {PAIRING_COLUMNS} FROM pairing_requests"
            " WHERE channel = ? AND sender_id = ? AND status = 'pending'"
        )

        def write(db: sqlite3.Connection) -> PairingRequest | None:
            db.execute(
                "UPDATE pairing_requests SET status = 'expired', decided_at = ?"
                " WHERE status = 'pending' AND expires_at <= ?",
                (at, at),
            )
            for _attempt in range(10):
                row = db.execute(select, (channel, sender_id)).fetchone()
                if row is not None:
                    return PairingRequest.from_row(row)
                try:
                    inserted = db.execute(
                        "INSERT INTO pairing_requests (channel, code, sender_id, sender_name,"
                        " chat_id, status, created_at, expires_at)"
                        " SELECT ?, ?, ?, ?, ?, 'pending', ?, ? WHERE (SELECT count(*) FROM"
                        " pairing_requests WHERE channel = ? AND status = 'pending') < ?",
                        (
                            channel,
                            new_code(),
                            sender_id,
                            sender_name,
                            chat_id,
                            at,
                            stamp(expires_at),
                            channel,
                            max_pending,
                        ),
                    )
                except sqlite3.IntegrityError:
                    continue  # the code is taken on this channel: draw another
                if inserted.rowcount != 1:
                    return None
            raise sqlite3.DatabaseError("could not draw an unused pairing code")

        return await self.transaction(write)

    async def pairing_request(self, channel: str, code: str) -> PairingRequest | None:
        async with self._conn.execute(
            f"SELECT {PAIRING_COLUMNS} FROM pairing_requests WHERE channel = ? AND code = ?",
            (channel, code),
        ) as cursor:
            row = await cursor.fetchone()
        return PairingRequest.from_row(row) if row is not None else None

    async def pending_pairings(self, now: datetime) -> list[PairingRequest]:
        """Requests still waiting for the owner, oldest first."""
        async with self._conn.execute(
            f"SELECT {PAIRING_COLUMNS} FROM pairing_requests"
            " WHERE status = 'pending' AND expires_at > ? ORDER BY created_at",
            (stamp(now),),
        ) as cursor:
            return [PairingRequest.from_row(row) async for row in cursor]

    async def decide_pairing(
        self, channel: str, code: str, *, approve: bool, now: datetime
    ) -> bool:
        """Approve (remembering the sender) or reject a pending, unexpired request, in one
        transaction; False when there was no such request."""
        at = stamp(now)

        def write(db: sqlite3.Connection) -> bool:
            changed = db.execute(
                "UPDATE pairing_requests SET status = ?, decided_at = ?"
                " WHERE channel = ? AND code = ? AND status = 'pending' AND expires_at > ?",
                ("approved" if approve else "rejected", at, channel, code, at),
            )
            if changed.rowcount != 1:
                return False
            if approve:
                db.execute(
                    "INSERT OR REPLACE INTO approved_senders (channel, sender_id, sender_name,"
                    " approved_at, code) SELECT channel, sender_id, sender_name, ?, code"
                    " FROM pairing_requests WHERE channel = ? AND code = ?",
                    (at, channel, code),
                )
            return True

        return await self.transaction(write)

    async def append_context(
        self, session: Session, entry: TranscriptEntry, *, dedup_id: str | None = None
    ) -> bool:
        """Store a message that starts no turn (group chatter kept as context).

        Like ``begin_turn``, a redelivered message (same ``dedup_id``) is stored once:
        returns False then.
        """
        now = _now()
        row = _entry_row(session.key, session.epoch, entry)

        def write(db: sqlite3.Connection) -> bool:
            if dedup_id is not None:
                seen = db.execute(
                    "INSERT OR IGNORE INTO inbound_seen (channel, chat_id, message_id,"
                    " session_key, received_at) VALUES (?, ?, ?, ?, ?)",
                    (session.channel, session.chat_id, dedup_id, session.key, now),
                )
                if seen.rowcount != 1:
                    return False
            db.execute(_INSERT_MESSAGE, row)
            return True

        return await self.transaction(write)

    # plumbing -------------------------------------------------------------------------

    async def transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` as one transaction on aiosqlite's thread, committed or rolled back.

        Each public aiosqlite call is one thread hop (~40 µs here, far more when the event
        loop is busy); a turn's writes are a few statements, so they travel together in a
        single hop through ``Connection._execute``, the internal entry every aiosqlite method
        uses (aiosqlite has no public way to run a function on its thread).
        """

        def run(db: sqlite3.Connection) -> T:
            try:
                result = work(db)
            except BaseException:
                db.rollback()
                raise
            db.commit()
            return result

        try:
            return await self._conn._execute(run, self._conn._conn)  # type: ignore[no-untyped-call,no-any-return]
        except sqlite3.DatabaseError as exc:
            raise _describe(exc, self.path) from None

    async def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        await self.transaction(lambda db: db.execute(sql, params))

    async def _write_many(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        await self.transaction(lambda db: db.executemany(sql, rows))


def _describe(exc: sqlite3.DatabaseError, path: Path) -> StoreError:
    text = str(exc)
    if "not a database" in text or "malformed" in text:
        return StoreError(
            f"the database {path} is damaged or not a clawbot database ({text})",
            hint="move the file aside (or restore a backup) and clawbot will create a fresh one",
        )
    if "readonly" in text or "read-only" in text:
        return StoreError(
            f"the database {path} is read-only ({text})",
            hint="make the file and its folder writable, or point CLAWBOT_HOME elsewhere",
        )
    return StoreError(f"database error on {path}: {text}")
