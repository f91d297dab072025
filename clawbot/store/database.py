"""The one SQLite connection (aiosqlite, WAL, foreign keys on) behind the store: opening,
configuring and migrating it (``clawbot.store.migrate``), transactions and group commit
(``clawbot.store.group_commit``), reads, retries while another process holds the lock and
the clear errors a user sees (``clawbot.store.sqlite_errors``), background checkpoints.

The table modules (``clawbot.store.sessions``, ``jobs``...) hold the SQL; this module only
runs it. Rows made durable elsewhere first (the intake journal) reach SQLite through the
:class:`PendingRows` hook: every transaction writes them before its own work, and every read
waits for them, so nothing ever reads around them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sqlite3
from collections.abc import Callable, Sequence, Sized
from pathlib import Path
from typing import Any, Protocol, TypeVar

import aiosqlite

from clawbot.errors import StoreError
from clawbot.store.group_commit import GroupCommit
from clawbot.store.migrate import migrate
from clawbot.store.sqlite_errors import describe, is_busy, retrying

log = logging.getLogger(__name__)
CHECKPOINT_EVERY_ROWS = 2048
"""Rows written between background WAL checkpoints: a turn writes about eight, in about
eleven pages, so this is near SQLite's default of 1,000 pages. Counted in rows, not commits:
with the intake journal a commit carries up to a hundred turns."""
RESTART_WAIT = 0.1
"""Seconds a checkpoint waits for readers to leave the WAL before giving up until the next."""
WAL_SIZE_LIMIT = 16 * 1024 * 1024
"""Bytes the WAL file is cut back to when it starts over, after a burst made it grow."""
T = TypeVar("T")


class PendingRows(Protocol):
    """Rows made durable outside SQLite and not yet written to it (the intake journal's):
    the next transaction, whichever it is, writes them first."""

    @property
    def waiting(self) -> Sized:
        """What is still to write; empty (false) when nothing is."""
        ...

    def write(self, db: sqlite3.Connection, count: int) -> None:
        """Write the first ``count`` waiting rows, inside the open transaction."""
        ...

    def stored(self, count: int) -> None:
        """The first ``count`` waiting rows were committed."""
        ...


class _NothingPending:
    """The hook of a database nothing is journalled for (and of one still opening)."""

    waiting: tuple[()] = ()

    def write(self, db: sqlite3.Connection, count: int) -> None:
        return None

    def stored(self, count: int) -> None:
        return None


def no_work(db: sqlite3.Connection) -> None:
    """A transaction's work when only the pending rows are to be written."""
    return None


class Database(GroupCommit):
    """Async access to one SQLite database. Open with :meth:`open`, close with :meth:`close`."""

    def __init__(self, conn: aiosqlite.Connection, path: Path) -> None:
        super().__init__()
        self._conn = conn
        self.path = path
        self.pending: PendingRows = _NothingPending()
        self._loop = asyncio.get_running_loop()
        self._queued = 0  # operations queued on, or running in, aiosqlite's thread
        self._closed = False
        self._wal = False
        self._writable = True  # the last transaction did not fail on the database itself
        self._checkpointed_at = 0  # the connection's total_changes at the last checkpoint
        self._checkpointer: aiosqlite.Connection | None = None
        self._checkpointing: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, path: Path, *, synchronous: str = "NORMAL") -> Database:
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
        database = cls(conn, path)
        try:
            await database._configure(synchronous)
            await migrate(path, await database.schema_version(), database._on_thread)
            await database.fetchall("PRAGMA foreign_keys=ON")
            # From here on nothing waits inside SQLite: a locked database is retried by
            # _commit without blocking the event loop, and checkpoints run in the background.
            await database.fetchall("PRAGMA busy_timeout=0")
            await database.fetchall("PRAGMA wal_autocheckpoint=0")
        except BaseException as exc:
            await database.abandon()
            if isinstance(exc, sqlite3.DatabaseError):
                raise describe(exc, path) from None
            raise
        return database

    async def _configure(self, synchronous: str) -> None:
        conn = self._conn
        # Reading the schema first turns "file is not a database" into an error here, at open.
        async with conn.execute("SELECT count(*) FROM sqlite_master") as cursor:
            await cursor.fetchall()
        async with conn.execute("PRAGMA journal_mode=WAL") as cursor:
            (mode,) = await cursor.fetchone() or (None,)
        self._wal = str(mode).lower() == "wal"
        await conn.execute(f"PRAGMA synchronous={synchronous}")
        await conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
        await conn.execute("PRAGMA busy_timeout=5000")

    async def close(self) -> None:
        """Close the connection (the pending rows are the caller's to write first); the
        last connection to close folds the WAL into the file."""
        if self._soon:
            with contextlib.suppress(Exception):
                await self.transaction(no_work)
        self._closed = True
        self._soon.close()
        if self._checkpointing is not None:
            with contextlib.suppress(Exception):
                await self._checkpointing
        if self._checkpointer is not None:
            with contextlib.suppress(Exception):
                await self._checkpointer.close()
        await self._conn.close()

    async def abandon(self) -> None:
        """Close the connection quietly, after a failed open."""
        with contextlib.suppress(Exception):
            await self._conn.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def idle(self) -> bool:
        """Nothing is on its way to SQLite (no shared commit due, nothing on aiosqlite's
        thread), the database is open, and the last transaction did not fail on the
        database itself."""
        return self._writable and not (
            self._group or self._group_scheduled or self._queued or self._closed
        )

    async def schema_version(self) -> int:
        (version,) = await self.fetchone("PRAGMA user_version") or (0,)
        return int(version)

    async def check_writable(self) -> None:
        """Raise the clear StoreError now if the database cannot be written (a read-only
        file or folder, a full disk). The write changes nothing."""

        def rewrite_version(db: sqlite3.Connection) -> None:
            (version,) = db.execute("PRAGMA user_version").fetchone()
            db.execute(f"PRAGMA user_version={int(version)}")

        await self.transaction(rewrite_version)

    async def flush(self) -> None:
        """Write the pending rows (and the rows no caller waits for) to SQLite now (reads
        and every transaction do it anyway; this is for a process that wants them visible
        to others at once)."""
        if self.pending.waiting or self._soon:
            await self.transaction(no_work)

    async def write_soon_rows(self) -> None:
        """Write the rows no caller waited for (``soon``) now: for a read of their table
        only, so the other reads of a turn never pay a commit for them."""
        if self._soon:
            await self.transaction(no_work)

    # reads ----------------------------------------------------------------------------

    async def fetchall(
        self, sql: str, params: Sequence[Any] = (), *, small: bool = False, flush: bool = True
    ) -> list[Any]:
        """Run a query; its rows. A ``small`` query (a lookup by key that reads a few pages)
        runs right here on the event loop when aiosqlite's thread is idle, for the reason
        writes do: it is cheaper than the hop to the thread and back. Any other query runs
        on the thread, so a long read never stalls the loop. ``flush`` off is only for
        tables the pending rows never write."""

        def query(db: sqlite3.Connection) -> list[Any]:
            return db.execute(sql, params).fetchall()

        if flush and self.pending.waiting:
            await self.flush()
        try:
            if small and self._queued == 0 and not self._closed:
                try:
                    return query(self._conn._conn)
                except sqlite3.OperationalError as exc:
                    if not is_busy(exc):
                        raise
            return await retrying(lambda: self._on_thread(query))
        except sqlite3.DatabaseError as exc:
            raise describe(exc, self.path) from None

    async def read(self, work: Callable[[sqlite3.Connection], T], *, flush: bool = True) -> T:
        """Run ``work``, a few queries that read only, on aiosqlite's thread in one hop (a
        search that looks before it ranks pays for one hop, not one per query)."""
        if flush and self.pending.waiting:
            await self.flush()
        try:
            return await retrying(lambda: self._on_thread(work))
        except sqlite3.DatabaseError as exc:
            raise describe(exc, self.path) from None

    async def fetchone(
        self, sql: str, params: Sequence[Any] = (), *, small: bool = False, flush: bool = True
    ) -> Any:
        rows = await self.fetchall(sql, params, small=small, flush=flush)
        return rows[0] if rows else None

    def lookup_here(self, sql: str, params: Sequence[Any]) -> Any:
        """The first row of a lookup by key, run right here without flushing: only for a
        caller that knows aiosqlite's thread is idle (see :meth:`idle`)."""
        try:
            return self._conn._conn.execute(sql, params).fetchone()
        except sqlite3.DatabaseError as exc:
            raise describe(exc, self.path) from None

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

    # checkpoints ----------------------------------------------------------------------

    def _committed(self) -> None:
        """Fold the WAL into the database file now and then, off the commit path: SQLite's
        own automatic checkpoint would make an unlucky commit wait for two fsyncs."""
        if self._wal and self._checkpointing is None and not self._closed:
            written = self._conn._conn.total_changes
            if written - self._checkpointed_at >= CHECKPOINT_EVERY_ROWS:
                self._checkpointed_at = written
                self._checkpointing = asyncio.ensure_future(self._checkpoint())

    async def _checkpoint(self) -> None:
        """Checkpoint on a connection of its own. A passive checkpoint copies the WAL into
        the database without blocking anyone; then a restart checkpoint makes the next write
        start the WAL over from its beginning. Without it, a busy bot's WAL grew without
        bound (SQLite starts the WAL over only when the first write after a complete
        checkpoint finds no reader in it, a chance a steady load rarely gives). The restart
        waits at most ``RESTART_WAIT`` for readers, holding off writers meanwhile, which
        retry on their own."""
        try:
            if self._checkpointer is None:
                self._checkpointer = await aiosqlite.connect(str(self.path), timeout=RESTART_WAIT)
            for mode in ("PASSIVE", "RESTART"):
                async with self._checkpointer.execute(f"PRAGMA wal_checkpoint({mode})") as cursor:
                    await cursor.fetchall()
        except sqlite3.Error as exc:
            log.warning("could not checkpoint the database (retried later): %s", exc)
        finally:
            self._checkpointing = None

    # writes ---------------------------------------------------------------------------

    async def write(self, sql: str, params: Sequence[Any]) -> int:
        """One statement in a transaction of its own; how many rows it changed."""
        return await self.transaction(lambda db: db.execute(sql, params).rowcount)

    async def write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self.transaction(lambda db: db.executemany(sql, rows))

    async def transaction(
        self, work: Callable[[sqlite3.Connection], T], *, background: bool = False
    ) -> T:
        """Run ``work`` as one write transaction, committed or rolled back as a whole.
        ``background`` work (a long one: it reads much) always runs on aiosqlite's thread."""
        try:
            return await self._commit(work, background=background)
        except sqlite3.DatabaseError as exc:
            raise describe(exc, self.path) from None

    def commit_here(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` committed right here on the event loop, its sqlite3 errors raised as
        they are: only for a caller that knows aiosqlite's thread is idle."""
        result = self._transact(self._conn._conn, work)
        self._committed()
        return result

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

        return await retrying(attempt)

    def _transact(self, db: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` in one ``BEGIN IMMEDIATE`` transaction, committed or rolled back as a
        whole. The pending rows go in first; they stay pending unless it commits, and a
        ``work`` that fails on its own does not keep them out."""
        pending = self.pending
        taken = len(pending.waiting)
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            if not is_busy(exc):
                self._writable = False
            raise
        soon = self._soon.take()
        try:
            if taken:
                pending.write(db, taken)
            if soon:
                self._write_soon(db, soon)
            result = work(db)
        except BaseException as exc:
            db.rollback()
            self._soon.give_back(soon)
            busy = is_busy(exc)
            if isinstance(exc, sqlite3.Error) and not busy:
                self._writable = False
            if taken and work is not no_work and not busy:
                with contextlib.suppress(sqlite3.Error):
                    self._transact(db, no_work)
            raise
        db.commit()
        self._writable = True
        if taken:
            pending.stored(taken)
        return result
