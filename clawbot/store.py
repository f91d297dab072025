"""The one SQLite database (aiosqlite, WAL, foreign keys on) behind everything that must
survive a restart. SQL lives here so another backend can replace this module's class.

Writes that precede a reply are durable before the reply is sent: committed, or appended to
the intake journal (``clawbot.intake``) and committed shortly after, a hundred turns to a
commit. Transcripts are only ever appended to; ``/new`` starts a new epoch instead of
deleting history.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import random
import socket
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, TypeVar

import aiosqlite
from pydantic import TypeAdapter

from clawbot.agents import AgentRecord, AgentSpec
from clawbot.backlog import BacklogItem
from clawbot.channels import ChatCursor
from clawbot.errors import LeaseLostError, StoreError
from clawbot.intake import Finish, Intake, IntakeJournal, orphans, replied_line
from clawbot.intake import supported as journal_supported
from clawbot.jobs import TurnJob
from clawbot.messages import ContentBlock, Provenance, TranscriptEntry
from clawbot.migrations import migrations
from clawbot.pairing import PAIRING_COLUMNS, PairingRequest, stamp
from clawbot.sessions import Session

_blocks = TypeAdapter(tuple[ContentBlock, ...])
log = logging.getLogger("clawbot.store")
BUSY_WAIT = 5.0
"""Seconds a write waits for another process's write lock before it fails."""
CHECKPOINT_EVERY = 256
"""Commits between background WAL checkpoints (about SQLite's default of 1,000 pages)."""
WAL_SIZE_LIMIT = 16 * 1024 * 1024
"""Bytes the WAL file is cut back to when it starts over, after a burst made it grow."""
WRITE_BEHIND_TURNS = 100
WRITE_BEHIND_SECONDS = 0.2
"""A turn that ends while its message is still only in the intake journal is journalled
too; journalled messages and turns reach SQLite together, when a turn ends with this many
waiting, or this long after the first turn ended (sooner with any other write, before any
read)."""
T = TypeVar("T")
TurnStatus = Literal["queued", "running", "done", "failed", "cancelled"]


def _now() -> str:
    return datetime.now(UTC).isoformat()


def new_id(prefix: str) -> str:
    """Unique and time-ordered (microseconds, then 24 random bits, like a UUIDv7), so a new
    row lands at the end of its id index rather than on a random page of it. An id is a
    name, not a secret: the bits come from ``random`` (reseeded in a forked child), which
    unlike ``secrets`` costs no system call."""
    return f"{prefix}_{time.time_ns() // 1000:013x}{random.getrandbits(24):06x}"


_INSERT_SEEN = (
    "INSERT OR IGNORE INTO inbound_seen (channel, chat_id, message_id, session_key,"
    " received_at) VALUES (?, ?, ?, ?, ?)"
)


def _ledger_row(session: Session, message_id: str, now: str) -> tuple[str, ...]:
    return (session.channel, session.chat_id, message_id, session.key, now)


def _first_delivery(db: sqlite3.Connection, ledger_row: Sequence[str]) -> bool:
    """Record a platform message id in the dedup ledger; False when it was seen before."""
    return db.execute(_INSERT_SEEN, ledger_row).rowcount == 1


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
_INSERT_JOB = (
    "INSERT INTO turn_jobs (id, session_key, lane, status, attempts, owner, lease_until,"
    " reply_to, started_at, created_at, updated_at, input_message_id, error, finished_at,"
    " reply_message_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_STATUS, _UPDATED_AT = 3, 10  # positions in a job row (an Intake's ``job``)


def _store_intake(db: sqlite3.Connection, intake: Intake, *, dedup: bool = True) -> bool:
    """Write an accepted message's rows; False (and nothing written) for a redelivery. An
    intake accepted from the journal is written whatever the ledger says (``dedup`` off):
    it was checked when accepted, and its turn runs already."""
    if intake.ledger is not None:
        first = _first_delivery(db, intake.ledger)
        if dedup and not first:
            return False
    message_id = db.execute(_INSERT_MESSAGE, intake.message).lastrowid
    finish = intake.finish
    if finish is None:
        db.execute(_INSERT_JOB, (*intake.job, message_id, None, None, None))
    else:  # the job goes in as it ended, pointing at its answer
        answer = None
        for row in finish.rows:
            row_id = db.execute(_INSERT_MESSAGE, row).lastrowid
            if row[2] == "assistant":
                answer = row_id
        job = list(intake.job)
        job[_STATUS], job[_UPDATED_AT] = finish.status, finish.at
        reply = answer if finish.status == "done" else None
        db.execute(_INSERT_JOB, (*job, message_id, finish.error, finish.at, reply))
    _mark_replied(db, intake.replied)
    return True


def _replay(
    db: sqlite3.Connection, intakes: Sequence[Intake], replied: Sequence[str] = ()
) -> list[Intake]:
    """Write the journalled intakes the database lacks (a job row says it has one) and the
    reply marks the journal noted; the intakes written."""
    added = []
    for intake in intakes:
        if db.execute("SELECT 1 FROM turn_jobs WHERE id = ?", (intake.job_id,)).fetchone():
            continue
        _store_intake(db, intake, dedup=False)
        added.append(intake)
    _mark_replied(db, replied)
    return added


def _no_work(db: sqlite3.Connection) -> None:
    return None


class Store:
    """Async access to the database. Open with :meth:`open`, close with :meth:`close`."""

    def __init__(self, conn: aiosqlite.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        # Who holds the leases of the jobs this process runs: host, pid and a per-open tag.
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._group: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]] = []
        self._group_drain: asyncio.Task[None] | None = None
        self._group_scheduled = False  # a drain is due or running
        self._pass_wrote = False  # this loop pass committed a write at once
        # Jobs that may have others merged into them (started carrying jobs, or taken over
        # from another process): only their finish has merged jobs to close as well.
        self._runners: set[str] = set()
        self._loop = asyncio.get_running_loop()
        self._queued = 0  # operations queued on, or running in, aiosqlite's thread
        self._closed = False
        self._wal = False
        self._commits = 0  # since the last checkpoint
        self._checkpointer: aiosqlite.Connection | None = None
        self._checkpointing: asyncio.Task[None] | None = None
        # Accepted messages made durable in the journal and not yet written to SQLite: the
        # next transaction writes them first (see clawbot.intake).
        self._journaling = str(path) != ":memory:" and journal_supported()
        self._journal_sync = False
        self._journal: IntakeJournal | None = None
        self._journal_failed = False  # an append failed: no more journalling in this process
        self._writable = True  # the last transaction did not fail on the database itself
        self._pending: list[Intake] = []
        self._pending_seen: set[tuple[str, str, str]] = set()
        self._write_behind: asyncio.TimerHandle | None = None
        self._writing: asyncio.Task[None] | None = None

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
            # Writes also run on the event loop's thread, never while aiosqlite's thread
            # holds the connection (see _commit).
            conn = await aiosqlite.connect(str(path), check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the database {path}: {exc}") from None
        store = cls(conn, path)
        try:
            await store._configure(synchronous)
            await store._migrate()
            await store._fetchall("PRAGMA foreign_keys=ON")
            # From here on nothing waits inside SQLite: a locked database is retried by
            # _commit without blocking the event loop, and checkpoints run in the background.
            await store._fetchall("PRAGMA busy_timeout=0")
            await store._fetchall("PRAGMA wal_autocheckpoint=0")
            await store.recover_intakes()
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
            mode = await cursor.fetchone()
        self._wal = mode is not None and str(mode[0]).lower() == "wal"
        self._journal_sync = synchronous.upper() in ("FULL", "EXTRA")
        await conn.execute(f"PRAGMA synchronous={synchronous}")
        await conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
        await conn.execute("PRAGMA busy_timeout=5000")

    async def _migrate(self) -> None:
        row = await self._fetchone("PRAGMA user_version")
        version = int(row[0]) if row else 0
        known = migrations()
        latest = known[-1][0] if known else 0
        if version > latest:
            raise StoreError(
                f"the database {self.path} was written by a newer clawbot (schema {version})",
                hint="upgrade clawbot or point CLAWBOT_HOME at another folder",
            )
        # Foreign keys are still off here (see open): a migration may rebuild a table the
        # documented way (create, copy, drop, rename), and with them on, dropping the old
        # table would cascade into the rows that refer to it. So each migration is checked
        # for dangling references before it commits.
        for number, _name, script in known:
            if number <= version:
                continue
            await self._conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version={number};")
            if await self._fetchall("PRAGMA foreign_key_check"):
                await self._fetchall("ROLLBACK")
                raise StoreError(
                    f"migration {number} of {self.path} would leave rows that refer to"
                    " missing ones, so it was not applied",
                    hint="restore the database from a backup and report this as a bug",
                )
            await self._fetchall("COMMIT")

    async def close(self) -> None:
        """Close the database; the last connection to close folds the WAL into the file.
        Journalled intakes are written first; when that fails, the journal stays for the
        next start to replay."""
        if self._write_behind is not None:
            self._write_behind.cancel()
            self._write_behind = None
        if self._writing is not None:
            with contextlib.suppress(Exception):
                await self._writing
        try:
            await self.flush()
        except StoreError as exc:
            where = self._journal.path.name if self._journal else "the intake journal"
            log.warning("kept accepted messages in %s for the next start: %s", where, exc)
        if self._journal is not None:
            if self._pending:
                self._journal.release()
            else:
                self._journal.delete()
            self._journal = None
        self._closed = True
        if self._checkpointing is not None:
            with contextlib.suppress(Exception):
                await self._checkpointing
        if self._checkpointer is not None:
            with contextlib.suppress(Exception):
                await self._checkpointer.close()
        await self._conn.close()

    async def schema_version(self) -> int:
        row = await self._fetchone("PRAGMA user_version")
        return int(row[0]) if row else 0

    # sessions -------------------------------------------------------------------------

    async def get_session(self, key: str) -> Session | None:
        row = await self._fetchone(
            "SELECT key, channel, chat_id, thread_id, chat_type, agent_id, model_override,"
            " deliver, owner_key, epoch, meta_json FROM sessions WHERE key = ?",
            (key,),
            small=True,
            flush=False,
        )
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
        inserted = await self._write(
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
        if inserted:
            return session
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
        return [
            row[0] for row in await self._fetchall("SELECT key FROM sessions ORDER BY created_at")
        ]

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
        rows = await self._fetchall(sql, params, small=limit is not None)
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

    async def count_messages(self, key: str, epoch: int | None = None) -> int:
        """Messages stored for a session: in one epoch (conversation) when given, else all."""
        sql = "SELECT count(*) FROM messages WHERE session_key = ?"
        params: tuple[Any, ...] = (key,)
        if epoch is not None:
            sql, params = sql + " AND epoch = ?", (key, epoch)
        row = await self._fetchone(sql, params)
        return int(row[0]) if row else 0

    async def append_entries(self, session: Session, entries: Sequence[TranscriptEntry]) -> None:
        await self._write_many(
            _INSERT_MESSAGE, [_entry_row(session.key, session.epoch, e) for e in entries]
        )

    # turns ----------------------------------------------------------------------------

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
        """Append the turn's remaining entries and close its job (and the jobs merged into
        it), atomically. Raises LeaseLostError when another process took the job over."""
        rows = [_entry_row(session.key, session.epoch, e) for e in entries]
        now = _now()
        if self._journal_free() and self._finish_in_journal(job_id, rows, status, error, now):
            return
        runner = job_id in self._runners

        def finish(conn: sqlite3.Connection) -> None:
            # The rows go in first so the job can point at its final answer; a fenced-off
            # finish below raises, and the transaction takes them back out.
            answer = None
            for row in rows:
                row_id = conn.execute(_INSERT_MESSAGE, row).lastrowid
                if row[2] == "assistant":
                    answer = row_id
            closed = conn.execute(
                "UPDATE turn_jobs SET status = ?, error = ?, updated_at = ?, finished_at = ?,"
                " reply_message_id = coalesce(?, reply_message_id)"
                " WHERE id = ? AND (owner IS NULL OR owner = ?)",
                (status, error, now, now, answer if status == "done" else None, job_id, self.owner),
            )
            if closed.rowcount != 1:
                _check_owner(conn, job_id, self.owner)
            if runner:
                conn.execute(
                    "UPDATE turn_jobs SET status = ?, error = ?, updated_at = ?, finished_at = ?,"
                    " replied = 1 WHERE merged_into = ?",
                    (status, error, now, now, job_id),
                )

        try:
            await self.grouped(finish)
        finally:  # finished, or another process's now (a take-over here adds it again)
            self._runners.discard(job_id)

    async def turn_job(self, job_id: str) -> dict[str, Any] | None:
        row = await self._fetchone(
            "SELECT id, session_key, lane, status, attempts, error FROM turn_jobs WHERE id = ?",
            (job_id,),
        )
        if row is None:
            return None
        keys = ("id", "session_key", "lane", "status", "attempts", "error")
        return dict(zip(keys, row, strict=True))

    async def turn_jobs_for(self, session_key: str) -> list[dict[str, Any]]:
        rows = await self._fetchall(
            "SELECT id, status, error FROM turn_jobs WHERE session_key = ? ORDER BY created_at",
            (session_key,),
        )
        return [{"id": r[0], "status": r[1], "error": r[2]} for r in rows]

    # agents ---------------------------------------------------------------------------

    async def list_agent_specs(self) -> list[AgentRecord]:
        rows = await self._fetchall(
            "SELECT config_json, source, file_hash FROM agent_specs ORDER BY agent_id"
        )
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
        return (
            await self._fetchone(
                "SELECT 1 FROM approved_senders WHERE channel = ? AND sender_id = ?",
                (channel, sender_id),
                flush=False,
            )
            is not None
        )

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
        row = await self._fetchone(
            f"SELECT {PAIRING_COLUMNS} FROM pairing_requests WHERE channel = ? AND code = ?",
            (channel, code),
        )
        return PairingRequest.from_row(row) if row is not None else None

    async def pending_pairings(self, now: datetime) -> list[PairingRequest]:
        """Requests still waiting for the owner, oldest first."""
        return [
            PairingRequest.from_row(row)
            for row in await self._fetchall(
                f"SELECT {PAIRING_COLUMNS} FROM pairing_requests"
                " WHERE status = 'pending' AND expires_at > ? ORDER BY created_at",
                (stamp(now),),
            )
        ]

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

        Like ``submit_job``, a redelivered message (same ``dedup_id``) is stored once:
        returns False then.
        """
        now = _now()
        row = _entry_row(session.key, session.epoch, entry)

        def write(db: sqlite3.Connection) -> bool:
            if dedup_id is not None and not _first_delivery(
                db, _ledger_row(session, dedup_id, now)
            ):
                return False
            db.execute(_INSERT_MESSAGE, row)
            return True

        return await self.transaction(write)

    # scheduling -----------------------------------------------------------------------

    async def submit_job(
        self,
        session: Session,
        job: TurnJob,
        *,
        entry: TranscriptEntry | None = None,
        item: BacklogItem | None = None,
        dedup_id: str | None = None,
        replied: Sequence[str] = (),
    ) -> bool:
        """Persist an inbound message and its TurnJob: its ``entry`` goes into the transcript
        (an idle session) or its backlog ``item`` into the backlog (a busy one). A
        redelivered platform message id writes nothing and returns False. ``replied`` marks
        jobs whose replies went out since (it rides along for free).

        An entry is made durable by one append to the intake journal when nothing else is
        on its way to SQLite; its rows then go in with the next transaction (the turn's
        answer, usually), so a turn commits once. Otherwise it is one transaction."""
        now = _now()
        ledger = _ledger_row(session, dedup_id, now) if dedup_id is not None else None
        job_row = (
            job.id,
            session.key,
            job.lane,
            job.status,
            job.attempts,
            job.owner,
            _iso(job.lease_until),
            job.reply_to,
            now if job.status == "running" else None,
            now,
            now,
        )
        if entry is not None and item is None:
            intake = Intake(
                ledger, _entry_row(session.key, session.epoch, entry), job_row, tuple(replied)
            )
            if self._journal_free():
                accepted = self._accept(intake)
                if accepted is not None:
                    return accepted
            return await self.grouped(functools.partial(_store_intake, intake=intake))

        def submit(conn: sqlite3.Connection) -> bool:
            if ledger is not None and not _first_delivery(conn, ledger):
                return False
            conn.execute(_INSERT_JOB, (*job_row, None, None, None, None))
            if item is not None:
                _insert_backlog(conn, session.key, item, now)
            _mark_replied(conn, replied)
            return True

        return await self.grouped(submit)

    async def start_job(
        self,
        session: Session,
        job_id: str,
        *,
        lease_until: datetime,
        entries: Sequence[TranscriptEntry] = (),
        carried: Sequence[str] = (),
        replied: Sequence[str] = (),
    ) -> None:
        """Begin a job's turn in one transaction: drain the backlog rows of the jobs it
        carries, write its input ``entries``, merge the ``carried`` jobs into it and take its
        lease."""
        now = _now()
        lease = _iso(lease_until)
        if carried:
            self._runners.add(job_id)

        def start(conn: sqlite3.Connection) -> None:
            drained = [job_id, *carried]
            conn.execute(f"DELETE FROM backlog WHERE job_id IN ({_marks(drained)})", drained)
            input_id = None
            for entry in entries:
                row_id = conn.execute(
                    _INSERT_MESSAGE, _entry_row(session.key, session.epoch, entry)
                ).lastrowid
                input_id = input_id or row_id
            if carried:
                conn.execute(
                    f"UPDATE turn_jobs SET merged_into = ?, updated_at = ?"
                    f" WHERE id IN ({_marks(carried)}) OR merged_into IN ({_marks(carried)})",
                    (job_id, now, *carried, *carried),
                )
            conn.execute(
                "UPDATE turn_jobs SET status = 'running', owner = ?, lease_until = ?,"
                " attempts = max(attempts, 1), started_at = ?, updated_at = ?,"
                " input_message_id = coalesce(?, input_message_id) WHERE id = ?",
                (self.owner, lease, now, now, input_id, job_id),
            )
            _mark_replied(conn, replied)

        await self.grouped(start)

    async def claim_job(self, job: TurnJob, lease_until: datetime) -> bool:
        """Take over an orphaned job (its owner crashed or its lease expired), counting an
        attempt. False when another process claimed it first."""
        now = _now()
        self._runners.add(job.id)  # its first owner may have merged jobs into it

        def claim(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "UPDATE turn_jobs SET status = 'running', owner = ?, lease_until = ?,"
                " attempts = attempts + 1, started_at = ?, updated_at = ?"
                " WHERE id = ? AND status = ? AND owner IS ?",
                (self.owner, _iso(lease_until), now, now, job.id, job.status, job.owner),
            )
            return cursor.rowcount == 1

        return await self.transaction(claim)

    async def requeue_job(
        self, session: Session, job_id: str, item: BacklogItem | None = None
    ) -> None:
        """A running turn stopped at a tool boundary or for shutdown: its job waits again,
        without an owner, with its resume token (when given) in the backlog."""
        now = _now()

        def requeue(conn: sqlite3.Connection) -> None:
            _check_owner(conn, job_id, self.owner)
            cursor = conn.execute(
                "UPDATE turn_jobs SET status = 'queued', owner = NULL, lease_until = NULL,"
                " updated_at = ? WHERE id = ? AND status = 'running'",
                (now, job_id),
            )
            if item is not None and cursor.rowcount == 1:
                _insert_backlog(conn, session.key, item, now)

        await self.transaction(requeue)

    async def close_jobs(
        self, job_ids: Sequence[str], status: TurnStatus, error: str | None = None
    ) -> None:
        """Close jobs (and the jobs merged into them) that end without a normal finish:
        stopped, past the deadline or out of attempts. Their backlog rows go too; the user
        was told already, so they count as replied. Taking ownership fences out a stale
        runner of a job given up on."""
        if not job_ids:
            return
        now = _now()
        ids = list(job_ids)

        def close(conn: sqlite3.Connection) -> None:
            conn.execute(
                f"UPDATE turn_jobs SET status = ?, error = ?, replied = 1, owner = ?,"
                f" updated_at = ?, finished_at = ?"
                f" WHERE id IN ({_marks(ids)}) OR merged_into IN ({_marks(ids)})",
                (status, error, self.owner, now, now, *ids, *ids),
            )
            conn.execute(f"DELETE FROM backlog WHERE job_id IN ({_marks(ids)})", ids)

        await self.transaction(close)
        self._runners.difference_update(ids)

    async def renew_leases(self, job_ids: Sequence[str], until: datetime) -> None:
        """Extend the leases of long-running jobs this process still owns (one statement)."""
        if not job_ids:
            return
        ids = list(job_ids)

        def renew(conn: sqlite3.Connection) -> None:
            conn.execute(
                f"UPDATE turn_jobs SET lease_until = ? WHERE owner = ? AND id IN ({_marks(ids)})",
                (_iso(until), self.owner, *ids),
            )

        await self.transaction(renew)

    async def mark_replied(self, job_ids: Sequence[str]) -> None:
        if job_ids:
            await self.transaction(lambda conn: _mark_replied(conn, job_ids))

    async def forget_seen(self, older_than: timedelta, *, chunk: int = 5000) -> int:
        """Forget the platform message ids taken more than ``older_than`` ago, so the dedup
        ledger stays bounded; how many were forgotten. Platforms redeliver within hours or
        not at all, so a retention of days loses no protection.

        It walks the ledger in key order, ``chunk`` keys per transaction, each picking up
        where the last one ended: the whole pass reads the ledger once, no transaction holds
        the write lock long or swells the WAL, and it all runs on aiosqlite's thread, never
        stalling the event loop."""
        cutoff = (datetime.now(UTC) - older_than).isoformat()

        def forget(
            db: sqlite3.Connection, after: _LedgerKey | None
        ) -> tuple[int, _LedgerKey | None]:
            """Forget the old ids among the next ``chunk`` keys after ``after``; how many,
            and the last key of that window (None: the walk reached the end)."""
            window, params = ([_AFTER_KEY], list(after)) if after is not None else ([], [])
            end = db.execute(
                "SELECT channel, chat_id, message_id FROM inbound_seen"
                f"{_where(window)} ORDER BY channel, chat_id, message_id LIMIT 1 OFFSET ?",
                (*params, chunk - 1),
            ).fetchone()
            if end is not None:
                window, params = [*window, _UPTO_KEY], [*params, *end]
            removed = db.execute(
                f"DELETE FROM inbound_seen{_where(['received_at < ?', *window])}",
                (cutoff, *params),
            ).rowcount
            return removed, end

        forgotten, after = 0, None
        while True:
            removed, after = await self.transaction(
                functools.partial(forget, after=after), background=True
            )
            forgotten += removed
            if after is None:
                return forgotten

    async def recent_chats(self, channel: str, since: datetime) -> list[ChatCursor]:
        """The chats (and threads) of ``channel`` with a session that took a platform message
        at or after ``since``, each with the last message id it took and when: where an
        adapter whose platform never redelivers resumes reading (``Adapter.catch_up``)."""
        rows = await self._fetchall(
            "SELECT s.chat_id, s.thread_id, seen.message_id, latest.last_at"
            " FROM (SELECT session_key, chat_id, MAX(received_at) AS last_at"
            "       FROM inbound_seen WHERE channel = ? AND received_at >= ?"
            "       GROUP BY session_key, chat_id) AS latest"
            " JOIN sessions AS s ON s.key = latest.session_key"
            " JOIN inbound_seen AS seen ON seen.channel = ? AND seen.chat_id = latest.chat_id"
            "  AND seen.session_key = latest.session_key AND seen.received_at = latest.last_at"
            " ORDER BY latest.last_at",
            (channel, since.astimezone(UTC).isoformat(), channel),
        )
        cursors: dict[tuple[str, str | None], ChatCursor] = {}
        for chat_id, thread_id, message_id, last_at in rows:  # one per chat: ties are rare
            cursors[(chat_id, thread_id)] = ChatCursor(
                chat_id=chat_id,
                thread_id=thread_id,
                last_message_id=message_id,
                last_seen=datetime.fromisoformat(last_at),
            )
        return list(cursors.values())

    async def recover_intakes(self) -> int:
        """Write the rows of the messages that processes which died had accepted into their
        intake journals but not yet into SQLite, and delete those journals; how many
        messages were missing. Runs at open, and in the housekeeping for a dead peer."""
        if not self._journaling:
            return 0
        recovered = 0
        for orphan in orphans(self.path):
            try:
                added = await self.transaction(
                    functools.partial(_replay, intakes=orphan.intakes, replied=orphan.replied),
                    background=True,
                )
            except BaseException:
                orphan.release()
                raise
            orphan.delete()
            if added:
                log.warning(
                    "recovered %d accepted message(s), %d answered, from %s, left by a process"
                    " that stopped before storing them",
                    len(added),
                    sum(1 for intake in added if intake.finish is not None),
                    orphan.path.name,
                )
            recovered += len(added)
        return recovered

    async def open_jobs(self) -> list[TurnJob]:
        """Every queued or running job, oldest first: the work to recover at start-up.
        (Such a job is never replied yet; saying so lets SQLite use the pending index.)"""
        return await self._jobs("status IN ('queued', 'running') AND replied = 0")

    async def unreplied_jobs(self) -> list[TurnJob]:
        """Finished turns whose reply may not have gone out before a crash."""
        return await self._jobs(
            "status IN ('done', 'failed') AND replied = 0 AND owner IS NOT NULL"
            " AND merged_into IS NULL"
        )

    async def turn_reply(self, job_id: str) -> str | None:
        """The final answer a finished turn stored, for sending it again."""
        row = await self._fetchone(
            "SELECT m.content_json FROM turn_jobs j JOIN messages m ON m.id = j.reply_message_id"
            " WHERE j.id = ?",
            (job_id,),
            small=True,
        )
        if row is None:  # finished before migration 6 recorded the pointer
            row = await self._fetchone(
                "SELECT content_json FROM messages WHERE turn_id = ? AND role = 'assistant'"
                " ORDER BY id DESC LIMIT 1",
                (job_id,),
            )
        if row is None:
            return None
        entry = TranscriptEntry(role="assistant", content=_blocks.validate_json(row[0]))
        return entry.text

    async def defer_context(
        self, session: Session, entry: TranscriptEntry, *, dedup_id: str | None = None
    ) -> int | None:
        """Hold a context message (one that starts no turn) back until the session's running
        turn ends, durably; its row id, or None for a redelivered message."""
        now = _now()

        def defer(db: sqlite3.Connection) -> int | None:
            if dedup_id is not None and not _first_delivery(
                db, _ledger_row(session, dedup_id, now)
            ):
                return None
            return db.execute(
                "INSERT INTO backlog (session_key, job_id, kind, payload_json, created_at)"
                " VALUES (?, NULL, 'context', ?, ?)",
                (session.key, entry.model_dump_json(), now),
            ).lastrowid

        return await self.transaction(defer)

    async def record_context(
        self, session: Session, rows: Sequence[int], entries: Sequence[TranscriptEntry]
    ) -> None:
        """Move held-back context messages into the transcript."""
        ids = list(rows)
        values = [_entry_row(session.key, session.epoch, e) for e in entries]

        def record(db: sqlite3.Connection) -> None:
            db.executemany(_INSERT_MESSAGE, values)
            db.execute(f"DELETE FROM backlog WHERE id IN ({_marks(ids)})", ids)

        await self.transaction(record)

    async def deferred_context(self) -> list[tuple[int, str, TranscriptEntry]]:
        """(row id, session key, entry) of every held-back context message, oldest first."""
        rows = await self._fetchall(
            "SELECT id, session_key, payload_json FROM backlog WHERE kind = 'context' ORDER BY id"
        )
        return [(row[0], row[1], TranscriptEntry.model_validate_json(row[2])) for row in rows]

    async def backlog_items(self, session_key: str | None = None) -> list[tuple[str, BacklogItem]]:
        """(session key, item) of the stored backlog, oldest first; of one session if given."""
        sql = "SELECT session_key, payload_json FROM backlog WHERE kind != 'context'"
        params: tuple[Any, ...] = ()
        if session_key is not None:
            sql += " AND session_key = ?"
            params = (session_key,)
        rows = await self._fetchall(sql + " ORDER BY id", params)
        return [(row[0], BacklogItem.model_validate_json(row[1])) for row in rows]

    async def grouped(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Like :meth:`transaction`, with group commit: the first write of an event-loop pass
        commits at once, right here (no task, no thread, no wait for the loop), and the
        writes issued after it in the same pass share one commit in the next pass, so under
        a burst the per-message cost is a savepoint, not a commit. Each caller returns once
        its own work is committed; a failing work is rolled back alone. A shared batch is
        committed by a callback, not by any caller, so a caller that is cancelled never
        strands another caller's work."""
        if not (self._group_scheduled or self._pass_wrote or self._queued or self._closed):
            self._pass_wrote = True
            self._loop.call_soon(self._end_pass)
            try:
                result = self._transact(self._conn._conn, work)
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise _describe(exc, self.path) from None
            except sqlite3.DatabaseError as exc:
                raise _describe(exc, self.path) from None
            else:
                self._committed()
                return result
        future: asyncio.Future[T] = self._loop.create_future()
        self._group.append((work, future))
        if not self._group_scheduled:
            self._group_scheduled = True
            self._loop.call_soon(self._drain_now)
        return await future

    def _end_pass(self) -> None:
        self._pass_wrote = False

    def _drain_now(self) -> None:
        """Commit the pass's batch right here when the connection is free (the common case:
        no task, no thread). When aiosqlite's thread is busy, or the database is locked by
        another process, a task takes over and waits its turn."""
        if self._queued or self._closed:
            self._group_drain = asyncio.ensure_future(self._drain_group())
            return
        batch, self._group = self._group, []
        try:
            results = self._transact(self._conn._conn, _group_work(batch))
        except sqlite3.OperationalError as exc:
            if _is_busy(exc):
                self._group[:0] = batch
                self._group_drain = asyncio.ensure_future(self._drain_group())
                return
            results = [(False, exc)] * len(batch)
        except Exception as exc:
            results = [(False, exc)] * len(batch)
        else:
            self._committed()
        self._group_scheduled = False
        self._settle(batch, results)

    async def _drain_group(self) -> None:
        try:
            while self._group:
                batch, self._group = self._group, []
                try:
                    results = await self._commit(_group_work(batch))
                except BaseException as exc:
                    results = [(False, exc)] * len(batch)
                self._settle(batch, results)
        finally:
            self._group_drain = None
            self._group_scheduled = False

    def _settle(
        self,
        batch: Sequence[tuple[Any, asyncio.Future[Any]]],
        results: Sequence[tuple[bool, Any]],
    ) -> None:
        for (_, future), (ok, value) in zip(batch, results, strict=True):
            if future.done():
                continue
            if ok:
                future.set_result(value)
            elif isinstance(value, sqlite3.DatabaseError):
                future.set_exception(_describe(value, self.path))
            else:
                future.set_exception(value)

    async def _jobs(self, where: str) -> list[TurnJob]:
        rows = await self._fetchall(
            f"SELECT {_JOB_COLUMNS} FROM turn_jobs WHERE {where} ORDER BY created_at, id"
        )
        return [_job(row) for row in rows]

    # plumbing -------------------------------------------------------------------------

    async def transaction(
        self, work: Callable[[sqlite3.Connection], T], *, background: bool = False
    ) -> T:
        """Run ``work`` as one write transaction, committed or rolled back as a whole.
        ``background`` work (a long one: it reads much) always runs on aiosqlite's thread."""
        try:
            return await self._commit(work, background=background)
        except sqlite3.DatabaseError as exc:
            raise _describe(exc, self.path) from None

    async def _commit(
        self, work: Callable[[sqlite3.Connection], T], *, background: bool = False
    ) -> T:
        """One ``BEGIN IMMEDIATE`` transaction around ``work``.

        A turn's writes are a few small statements and, with WAL and no checkpoint on the
        commit path, cost tens of microseconds: less than the hop to aiosqlite's thread and
        back, which also makes SQLite and the event loop take turns at the GIL. So when
        that thread is idle the transaction runs right here on the event loop; otherwise it
        queues behind the thread's work, keeping order and never sharing the connection
        between two threads at once. Nothing blocks inside SQLite (busy_timeout is 0): when
        another process holds the write lock, the attempt is retried after an async backoff
        for up to ``BUSY_WAIT`` seconds.
        """

        async def attempt() -> T:
            if self._queued == 0 and not self._closed and not background:
                result = self._transact(self._conn._conn, work)
            else:
                result = await self._on_thread(functools.partial(self._transact, work=work))
            self._committed()
            return result

        return await self._retrying(attempt)

    def _transact(self, db: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` in one ``BEGIN IMMEDIATE`` transaction, committed or rolled back as a
        whole. The journalled intakes not yet stored go in first; they stay pending unless
        it commits, and a ``work`` that fails on its own does not keep them out."""
        taken = len(self._pending)
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            if not _is_busy(exc):
                self._writable = False
            raise
        try:
            for intake in self._pending[:taken]:
                _store_intake(db, intake, dedup=False)
            result = work(db)
        except BaseException as exc:
            db.rollback()
            busy = _is_busy(exc)
            if isinstance(exc, sqlite3.Error) and not busy:
                self._writable = False
            if taken and work is not _no_work and not busy:
                with contextlib.suppress(sqlite3.Error):
                    self._transact(db, _no_work)
            raise
        db.commit()
        self._writable = True
        if taken:
            del self._pending[:taken]
            if not self._pending:
                self._pending_seen.clear()
                if self._journal is not None:
                    try:
                        self._journal.stored()
                    except OSError as exc:
                        log.warning("could not reset the intake journal (retried later): %s", exc)
        return result

    def note_replied(self, job_id: str) -> None:
        """Note in the intake journal, at once, that a job's reply went out. Its mark in
        SQLite rides along with a later transaction; a crash before that would otherwise
        make the next start send the reply again. One append, no commit. (A journal that
        starts over drops notes whose marks are still on their way: those replies may be
        sent twice after a crash, as without the note.)"""
        if not self._journaling or self._journal_failed:
            return
        try:
            self._journal_append(replied_line(job_id))
        except OSError as exc:
            log.warning("cannot write the intake journal (%s); using transactions from now on", exc)
            self._journal_failed = True

    async def check_writable(self) -> None:
        """Raise the store's clear StoreError now if the database cannot be written (a
        read-only file or folder, a full disk), so a serving process refuses to start
        instead of taking messages it cannot keep. The write changes nothing."""

        def rewrite_version(db: sqlite3.Connection) -> None:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            db.execute(f"PRAGMA user_version={int(version)}")

        await self.transaction(rewrite_version)

    async def flush(self) -> None:
        """Write the journalled intakes to SQLite now (reads and every transaction do it
        anyway; this is for a process that wants them visible to others at once)."""
        if self._pending:
            await self.transaction(_no_work)

    def _accept(self, intake: Intake) -> bool | None:
        """Make an intake durable in the journal, not yet in SQLite; False (and nothing
        kept) for a redelivered platform message, None when the journal cannot be written."""
        key = intake.seen_key
        if key is not None:
            if key in self._pending_seen:
                return False
            try:
                seen = self._conn._conn.execute(
                    "SELECT 1 FROM inbound_seen WHERE channel = ? AND chat_id = ?"
                    " AND message_id = ?",
                    key,
                ).fetchone()
            except sqlite3.DatabaseError as exc:
                raise _describe(exc, self.path) from None
            if seen is not None:
                return False
        try:
            self._journal_append(intake.line())
        except OSError as exc:
            # Nothing is lost: the message takes a transaction instead, as every later one
            # of this process does, and the rows already journalled go in with it.
            log.warning(
                "cannot write the intake journal next to %s (%s); storing each message in a"
                " transaction of its own from now on",
                self.path,
                exc,
            )
            self._journal_failed = True
            return None
        self._pending.append(intake)
        if key is not None:
            self._pending_seen.add(key)
        return True

    def _journal_append(self, data: bytes) -> None:
        """Append one record to this process's journal, creating it on first use."""
        if self._journal is None:
            self._journal = IntakeJournal.create(self.path, sync=self._journal_sync)
        self._journal.append(data)

    def _finish_in_journal(
        self,
        job_id: str,
        rows: list[tuple[Any, ...]],
        status: TurnStatus,
        error: str | None,
        now: str,
    ) -> bool:
        """End a turn whose message is still only in the journal by one more append; False
        when its message reached SQLite already. Nobody else can have taken such a job
        over (no other process can see it), so there is nothing to fence."""
        index = len(self._pending) - 1
        while index >= 0 and self._pending[index].job_id != job_id:
            index -= 1
        if index < 0 or self._journal is None:
            return False
        finish = Finish(tuple(rows), status, error, now)
        try:
            self._journal.append(finish.line(job_id))
        except OSError as exc:
            log.warning("cannot write the intake journal (%s); using transactions from now on", exc)
            self._journal_failed = True
            return False  # stored by a transaction instead, which reports what is wrong
        self._pending[index] = replace(self._pending[index], finish=finish)
        if len(self._pending) >= WRITE_BEHIND_TURNS:
            try:
                self._transact(self._conn._conn, _no_work)
            except sqlite3.Error:  # locked by another process, say: retried with a backoff
                self._write_soon()
            else:
                self._committed()
        elif self._write_behind is None:
            self._write_behind = self._loop.call_later(WRITE_BEHIND_SECONDS, self._write_soon)
        return True

    def _write_soon(self) -> None:
        """Write the journalled turns to SQLite in a task of their own."""
        if self._write_behind is not None:
            self._write_behind.cancel()
            self._write_behind = None
        if self._pending and self._writing is None and not self._closed:
            self._writing = asyncio.ensure_future(self.flush())
            self._writing.add_done_callback(self._written)

    def _written(self, task: asyncio.Task[None]) -> None:
        self._writing = None
        if not task.cancelled() and task.exception() is not None:
            log.error("could not store journalled turns (retried later): %s", task.exception())
            if self._write_behind is None and not self._closed:
                self._write_behind = self._loop.call_later(1.0, self._write_soon)

    def _journal_free(self) -> bool:
        """An intake may go to the journal: nothing else is on its way to SQLite, so the
        next transaction, whichever it is, writes it first, in order; and the last one did
        not fail on the database itself, so a store that cannot be written refuses a
        message up front rather than after its model call."""
        return (
            self._journaling
            and not self._journal_failed
            and self._writable
            and not (self._group or self._group_scheduled or self._queued or self._closed)
        )

    async def _fetchall(
        self, sql: str, params: Sequence[Any] = (), *, small: bool = False, flush: bool = True
    ) -> list[Any]:
        """Run a query; its rows. A ``small`` query (a lookup by key that reads a few pages)
        runs right here on the event loop when aiosqlite's thread is idle, for the reason
        writes do: it is cheaper than the hop to the thread and back. Any other query runs
        on the thread, so a long read never stalls the loop."""

        def query(db: sqlite3.Connection) -> list[Any]:
            return db.execute(sql, params).fetchall()

        if flush and self._pending:  # off only for tables an intake never writes
            await self.flush()
        try:
            if small and self._queued == 0 and not self._closed:
                try:
                    return query(self._conn._conn)
                except sqlite3.OperationalError as exc:
                    if not _is_busy(exc):
                        raise
            return await self._retrying(lambda: self._on_thread(query))
        except sqlite3.DatabaseError as exc:
            raise _describe(exc, self.path) from None

    async def _fetchone(
        self, sql: str, params: Sequence[Any] = (), *, small: bool = False, flush: bool = True
    ) -> Any:
        rows = await self._fetchall(sql, params, small=small, flush=flush)
        return rows[0] if rows else None

    async def _on_thread(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on aiosqlite's thread in one hop, through ``Connection._execute`` (the
        internal entry all aiosqlite methods use; it has no public way to run a function on
        its thread). The queued count drops only once the thread is done, even when the
        caller is cancelled, because _commit must not touch the connection before then."""
        self._queued += 1
        job = asyncio.ensure_future(self._conn._execute(fn, self._conn._conn))  # type: ignore[no-untyped-call]
        job.add_done_callback(self._left_thread)
        return await asyncio.shield(job)

    def _left_thread(self, _job: asyncio.Future[Any]) -> None:
        self._queued -= 1

    async def _retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """``attempt()``, tried again while the database is locked by another process."""
        try:
            return await attempt()
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise
        from tenacity import (
            AsyncRetrying,
            retry_if_exception,
            stop_after_delay,
            wait_exponential,
        )

        async for retry in AsyncRetrying(
            retry=retry_if_exception(_is_busy),
            stop=stop_after_delay(BUSY_WAIT),
            wait=wait_exponential(multiplier=0.001, max=0.05),
            reraise=True,
        ):
            with retry:
                return await attempt()
        raise AssertionError("unreachable: tenacity reraises the last failure")

    def _committed(self) -> None:
        """Fold the WAL into the database file now and then, off the commit path: SQLite's
        own automatic checkpoint would make an unlucky commit wait for two fsyncs."""
        self._commits += 1
        if (
            self._wal
            and self._commits >= CHECKPOINT_EVERY
            and self._checkpointing is None
            and not self._closed
        ):
            self._commits = 0
            self._checkpointing = asyncio.ensure_future(self._checkpoint())

    async def _checkpoint(self) -> None:
        """A passive checkpoint on a connection of its own: it never blocks a writer."""
        try:
            if self._checkpointer is None:
                self._checkpointer = await aiosqlite.connect(str(self.path))
            async with self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)") as cursor:
                await cursor.fetchall()
        except sqlite3.Error as exc:
            log.warning("could not checkpoint the database (retried later): %s", exc)
        finally:
            self._checkpointing = None

    async def _write(self, sql: str, params: tuple[Any, ...]) -> int:
        """One statement in a transaction of its own; how many rows it changed."""
        return await self.transaction(lambda db: db.execute(sql, params).rowcount)

    async def _write_many(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        await self.transaction(lambda db: db.executemany(sql, rows))


def _is_busy(exc: BaseException) -> bool:
    """Another connection holds the lock (SQLITE_BUSY or SQLITE_LOCKED, extended or not)."""
    code = getattr(exc, "sqlite_errorcode", None)  # absent when raised outside SQLite
    if not isinstance(exc, sqlite3.OperationalError) or code is None:
        return False
    return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _describe(exc: sqlite3.DatabaseError, path: Path) -> StoreError:
    text = str(exc)
    if _is_busy(exc):
        return StoreError(
            f"the database {path} stayed locked by another process for {BUSY_WAIT:g} s ({text})",
            hint="check that no other clawbot runs on the same CLAWBOT_HOME, then try again",
        )
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


_JOB_COLUMNS = (
    "id, session_key, lane, status, attempts, owner, lease_until, merged_into, reply_to,"
    " replied, error, created_at, started_at, finished_at"
)


def _job(row: Sequence[Any]) -> TurnJob:
    return TurnJob(
        id=row[0],
        session_key=row[1],
        lane=row[2],
        status=row[3],
        attempts=int(row[4]),
        owner=row[5],
        lease_until=_parse(row[6]),
        merged_into=row[7],
        reply_to=row[8],
        replied=bool(row[9]),
        error=row[10],
        created_at=_parse(row[11]),
        started_at=_parse(row[12]),
        finished_at=_parse(row[13]),
    )


_LedgerKey = tuple[str, str, str]
_AFTER_KEY = "(channel, chat_id, message_id) > (?, ?, ?)"
_UPTO_KEY = "(channel, chat_id, message_id) <= (?, ?, ?)"


def _where(conditions: Sequence[str]) -> str:
    return f" WHERE {' AND '.join(conditions)}" if conditions else ""


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None


def _parse(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" * len(values))


def _insert_backlog(conn: sqlite3.Connection, key: str, item: BacklogItem, now: str) -> None:
    conn.execute(
        "INSERT INTO backlog (session_key, job_id, kind, payload_json, created_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (key, item.job_id, item.kind, item.model_dump_json(), now),
    )


def _mark_replied(conn: sqlite3.Connection, job_ids: Sequence[str]) -> None:
    if job_ids:
        ids = list(job_ids)
        conn.execute(f"UPDATE turn_jobs SET replied = 1 WHERE id IN ({_marks(ids)})", ids)


def _group_work(
    batch: Sequence[tuple[Callable[[sqlite3.Connection], Any], Any]],
) -> Callable[[sqlite3.Connection], list[tuple[bool, Any]]]:
    """One transaction's work for a batch: (ok, value or exception) per write. Each write of
    a batch of several runs in a savepoint, so a failing one is rolled back alone; a single
    write needs none (the transaction is its savepoint)."""
    works = [work for work, _ in batch]

    def run(db: sqlite3.Connection) -> list[tuple[bool, Any]]:
        if len(works) == 1:
            return [(True, works[0](db))]
        results: list[tuple[bool, Any]] = []
        for work in works:
            db.execute("SAVEPOINT clawbot_work")
            try:
                value = work(db)
            except Exception as exc:
                db.execute("ROLLBACK TO clawbot_work")
                db.execute("RELEASE clawbot_work")
                results.append((False, exc))
            else:
                db.execute("RELEASE clawbot_work")
                results.append((True, value))
        return results

    return run


def _check_owner(conn: sqlite3.Connection, job_id: str, owner: str) -> None:
    """Fencing: a job another process has claimed is no longer ours to write."""
    row = conn.execute("SELECT owner FROM turn_jobs WHERE id = ?", (job_id,)).fetchone()
    if row is not None and row[0] is not None and row[0] != owner:
        raise LeaseLostError(f"job {job_id} is now run by {row[0]}")
