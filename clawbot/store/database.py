"""The one SQLite connection (aiosqlite, WAL, foreign keys on) behind the store: opening,
configuring and migrating it, transactions and group commit, reads, retries while another
process holds the lock, background checkpoints and the clear errors a user sees.

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
from collections.abc import Awaitable, Callable, Sequence, Sized
from pathlib import Path
from typing import Any, Protocol, TypeVar

import aiosqlite

from clawbot.errors import StoreError
from clawbot.store.migrations import migrations, statements

log = logging.getLogger(__name__)
BUSY_WAIT = 5.0
"""Seconds a write waits for another process's write lock before it fails."""
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


class Database:
    """Async access to one SQLite database. Open with :meth:`open`, close with :meth:`close`."""

    def __init__(self, conn: aiosqlite.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        self.pending: PendingRows = _NothingPending()
        self._group: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]] = []
        self._group_drain: asyncio.Task[None] | None = None
        self._group_scheduled = False  # a drain is due or running
        self._pass_wrote = False  # this loop pass committed a write at once
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
            await _migrate(database)
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
        self._closed = True
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
        """Write the pending rows to SQLite now (reads and every transaction do it anyway;
        this is for a process that wants them visible to others at once)."""
        if self.pending.waiting:
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
            return await self._retrying(lambda: self._on_thread(query))
        except sqlite3.DatabaseError as exc:
            raise describe(exc, self.path) from None

    async def read(self, work: Callable[[sqlite3.Connection], T], *, flush: bool = True) -> T:
        """Run ``work``, a few queries that read only, on aiosqlite's thread in one hop (a
        search that looks before it ranks pays for one hop, not one per query)."""
        if flush and self.pending.waiting:
            await self.flush()
        try:
            return await self._retrying(lambda: self._on_thread(work))
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

    async def _retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """``attempt()``, tried again while the database is locked by another process."""
        try:
            return await attempt()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
        from tenacity import (
            AsyncRetrying,
            retry_if_exception,
            stop_after_delay,
            wait_exponential,
        )

        async for retry in AsyncRetrying(
            retry=retry_if_exception(is_busy),
            stop=stop_after_delay(BUSY_WAIT),
            wait=wait_exponential(multiplier=0.001, max=0.05),
            reraise=True,
        ):
            with retry:
                return await attempt()
        raise AssertionError("unreachable: tenacity reraises the last failure")

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
                if not is_busy(exc):
                    raise describe(exc, self.path) from None
            except sqlite3.DatabaseError as exc:
                raise describe(exc, self.path) from None
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
            if is_busy(exc):
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
                future.set_exception(describe(value, self.path))
            else:
                future.set_exception(value)

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
        try:
            if taken:
                pending.write(db, taken)
            result = work(db)
        except BaseException as exc:
            db.rollback()
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


async def _migrate(database: Database) -> None:
    """Apply the migrations the database lacks, each in a transaction of its own."""
    version = await database.schema_version()
    known = migrations()
    latest = max((migration.number for migration in known), default=0)
    if version > latest:
        raise StoreError(
            f"the database {database.path} was written by a newer clawbot (schema {version})",
            hint="upgrade clawbot or point CLAWBOT_HOME at another folder",
        )
    # Foreign keys are still off here (see open): a migration may rebuild a table the
    # documented way (create, copy, drop, rename), and with them on, dropping the old
    # table would cascade into the rows that refer to it. So each migration is checked
    # for dangling references before it commits.
    for number, _name, script in known:
        if number <= version:
            continue
        applied = await database._on_thread(functools.partial(_apply, number, script))
        if not applied:
            raise StoreError(
                f"migration {number} of {database.path} would leave rows that refer to"
                " missing ones, so it was not applied",
                hint="restore the database from a backup and report this as a bug",
            )


def _apply(number: int, script: str, db: sqlite3.Connection) -> bool:
    """Apply migration ``number`` unless another process already has; False when it would
    leave dangling references (then nothing of it is kept). The write lock is taken first
    and the version read again under it, so two processes opening a new home at once
    apply each migration once (the other waits for the lock, then finds it done)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        (current,) = db.execute("PRAGMA user_version").fetchone()
        if current < number:
            for statement in statements(script):
                db.execute(statement)
            db.execute(f"PRAGMA user_version={number}")
            if db.execute("PRAGMA foreign_key_check").fetchall():
                db.execute("ROLLBACK")
                return False
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return True


def is_busy(exc: BaseException) -> bool:
    """Another connection holds the lock (SQLITE_BUSY or SQLITE_LOCKED, extended or not)."""
    code = getattr(exc, "sqlite_errorcode", None)  # absent when raised outside SQLite
    if not isinstance(exc, sqlite3.OperationalError) or code is None:
        return False
    return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def describe(exc: sqlite3.DatabaseError, path: Path) -> StoreError:
    """The StoreError a user sees for a database error: what went wrong and what to do."""
    text = str(exc)
    if is_busy(exc):
        return StoreError(
            f"the database {path} stayed locked by another process for {BUSY_WAIT:g} s ({text})",
            hint="check that no other clawbot runs on the same CLAWBOT_HOME, then try again",
        )
    if "not a database" in text or "malformed" in text:
        return damaged(path, text)
    if "readonly" in text or "read-only" in text:
        return StoreError(
            f"the database {path} is read-only ({text})",
            hint="make the file and its folder writable, or point CLAWBOT_HOME elsewhere",
        )
    return StoreError(f"database error on {path}: {text}")


def damaged(path: Path, detail: str) -> StoreError:
    """The StoreError for a database file SQLite cannot read as one: where, and what to do."""
    return StoreError(
        f"the database {path} is damaged or not a clawbot database ({detail})",
        hint="move the file aside (or restore a backup) and clawbot will create a fresh one",
    )


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
