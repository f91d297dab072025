"""The store on one SQLite file: the repositories of ``clawbot.store.interface`` over one
:class:`~clawbot.store.database.Database`, with the intake journal in front of it."""

from __future__ import annotations

import os
import socket
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from clawbot.store.access import SqliteAccess, SqlitePairing
from clawbot.store.agents import SqliteAgents
from clawbot.store.approvals import SqliteApprovals
from clawbot.store.audit import SqliteAuditLog
from clawbot.store.backlog import SqliteBacklog
from clawbot.store.console import SqliteConsole
from clawbot.store.database import Database
from clawbot.store.injections import SqliteInjections
from clawbot.store.intake import PendingIntakes
from clawbot.store.jobs import SqliteJobs
from clawbot.store.ledger import SqliteLedger
from clawbot.store.memories import SqliteMemories
from clawbot.store.schedules import SqliteSchedules
from clawbot.store.sessions import SqliteSessions, SqliteTranscripts
from clawbot.store.sqlite_errors import damaged, describe
from clawbot.store.usage import SqliteUsage

T = TypeVar("T")


class SqliteStore:
    """The SQLite implementation of :class:`clawbot.store.Store`. Open with :meth:`open`,
    close with :meth:`close`. ``transaction`` and ``grouped`` run raw SQL work, for tests
    and benchmarks only; ``pending.journaling`` turns the intake journal off."""

    def __init__(self, database: Database, *, synchronous: str = "NORMAL") -> None:
        self.database = database
        self.path = database.path
        # Who holds the leases of the jobs this process runs: host, pid and a per-open tag.
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.pending = PendingIntakes(database, synchronous=synchronous)
        self.sessions = SqliteSessions(database)
        self.transcripts = SqliteTranscripts(database)
        self.jobs = SqliteJobs(database, self.pending, owner=self.owner)
        self.backlog = SqliteBacklog(database)
        self.ledger = SqliteLedger(database)
        self.access = SqliteAccess(database)
        self.pairing = SqlitePairing(database)
        self.agents = SqliteAgents(database)
        self.injections = SqliteInjections(database)
        self.memories = SqliteMemories(database)
        self.audit = SqliteAuditLog(database)
        self.approvals = SqliteApprovals(database)
        self.usage = SqliteUsage(database)
        self.console = SqliteConsole(database)
        self.schedules = SqliteSchedules(database)

    @classmethod
    async def open(cls, path: Path, *, synchronous: str = "NORMAL") -> SqliteStore:
        """Open (creating if needed) and migrate the database, and store what processes
        that died left in their intake journals; a clear StoreError otherwise."""
        database = await Database.open(path, synchronous=synchronous)
        try:
            store = cls(database, synchronous=synchronous)
            await store.recover_intakes()
        except BaseException as exc:
            await database.abandon()
            if isinstance(exc, sqlite3.DatabaseError):
                raise describe(exc, path) from None
            raise
        return store

    async def close(self) -> None:
        """Close the database; the last connection to close folds the WAL into the file.
        Journalled intakes are written first; when that fails, the journal stays for the
        next start to replay."""
        await self.pending.close()
        await self.database.close()

    async def flush(self) -> None:
        """Write the journalled intakes to SQLite now (reads and every transaction do it
        anyway; this is for a process that wants them visible to others at once)."""
        await self.database.flush()

    async def check_writable(self) -> None:
        """Raise the store's clear StoreError now if the database cannot be written (a
        read-only file or folder, a full disk), so a serving process refuses to start
        instead of taking messages it cannot keep. The write changes nothing."""
        await self.database.check_writable()

    async def check_intact(self) -> None:
        """Raise the store's clear StoreError now if the database file is damaged, so a
        serving process refuses to start instead of answering each message with the error.
        ``PRAGMA quick_check`` reads each page once (a quarter of a second for 300 MB), on
        aiosqlite's thread; its first finding (without SQLite's banner) names the damage."""
        rows = await self.database.fetchall("PRAGMA quick_check", flush=False)
        found = [
            line.strip()
            for (report,) in rows
            for line in str(report).splitlines()
            if line.strip() and line != "ok" and not line.startswith("***")
        ]
        if found:
            raise damaged(self.database.path, found[0])

    async def schema_version(self) -> int:
        return await self.database.schema_version()

    def note_replied(self, job_id: str) -> None:
        """Note in the intake journal, at once, that a job's reply went out (one append,
        no commit); see :meth:`PendingIntakes.note_replied`."""
        self.pending.note_replied(job_id)

    async def recover_intakes(self) -> int:
        """Write the rows of the messages that processes which died had accepted into their
        intake journals but not yet into SQLite, and delete those journals; how many
        messages were missing. Runs at open, and in the housekeeping for a dead peer."""
        return await self.pending.recover()

    async def transaction(
        self, work: Callable[[sqlite3.Connection], T], *, background: bool = False
    ) -> T:
        """Run ``work`` as one write transaction (see :meth:`Database.transaction`)."""
        return await self.database.transaction(work, background=background)

    async def grouped(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` with group commit (see :meth:`Database.grouped`)."""
        return await self.database.grouped(work)
