"""The PostgreSQL connection behind the store (psycopg 3; why this driver: docs/postgres.md):
the repositories' units of work run on it as they run on SQLite, their SQL rewritten by
``clawbot.store.postgres.dialect``.

One connection. A unit of work (a plain function of the connection, as the repositories
write them) runs on the connection's one worker thread, so it runs whole without ever
blocking the event loop, its statements sent together up to each read of a result
(``clawbot.store.postgres.batching``) in ``BEGIN``/``COMMIT``. A single statement, and a
transaction written as one statement (:meth:`PostgresDatabase.commit_statement`), is sent
from the event loop itself (``clawbot.store.postgres.loop``): no hop to the thread and
back. Operations keep their order either way (one lock, taken in turn). The commit is the
durability point: nothing is journalled in front of it. A connection that broke is opened
again for the next operation."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import urlsplit

import psycopg
from psycopg.adapt import PyFormat, Transformer
from psycopg.sql import SQL, Identifier

from clawbot.errors import StoreError
from clawbot.store.postgres.batching import (
    IN_TRANSACTION,
    RIDING,
    Batch,
    BatchedConnection,
    Collected,
)
from clawbot.store.postgres.dialect import postgres
from clawbot.store.postgres.loop import (
    PREPARED_AT_MOST,
    Prepared,
    Rows,
    Step,
    exchange,
    failure,
    transaction,
)
from clawbot.store.riding_rows import RidingRows
from clawbot.store.sql import Connection

T = TypeVar("T")
log = logging.getLogger(__name__)


class PostgresCursor:
    """A statement's result as the repositories read it (``sqlite3.Cursor``'s surface)."""

    def __init__(self, cursor: psycopg.Cursor[Any], returns_id: bool) -> None:
        self._cursor = cursor
        self.lastrowid: int | None = None
        self.rowcount = cursor.rowcount
        if returns_id:
            row = cursor.fetchone()
            self.lastrowid = int(row[0]) if row is not None else None

    def fetchone(self) -> Any:
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()


class PostgresConnection:
    """The :class:`~clawbot.store.sql.Connection` a unit of work is given: runs the
    repositories' SQL in PostgreSQL's dialect."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> PostgresCursor:
        statement = postgres(sql)
        cursor = self._conn.execute(statement.sql, tuple(parameters) or None)
        return PostgresCursor(cursor, statement.returns_id)

    def executemany(self, sql: str, parameters: Sequence[Sequence[Any]], /) -> PostgresCursor:
        statement = postgres(sql, many=True)
        cursor = self._conn.cursor()
        cursor.executemany(statement.sql, [tuple(row) for row in parameters])
        return PostgresCursor(cursor, False)


class PostgresDatabase:
    """Async access to one PostgreSQL database over one connection. Open with :meth:`open`
    (``clawbot.store.postgres.migrate`` brings it up to date), close with :meth:`close`."""

    def __init__(self, url: str, conn: psycopg.Connection[Any]) -> None:
        self.url = url
        self.where = where(url)
        self._conn = conn
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clawbot-postgres")
        self._turn = asyncio.Lock()
        """Held by the operation using the connection: one at a time, in the order asked."""
        self._rows = Rows(conn)
        self._binder = psycopg.ClientCursor(conn)
        """Binds values into statements sent from the loop (``mogrify``: no round trip)."""
        self._dumper = Transformer.from_context(conn)
        self._prepared: dict[str, Prepared] = {}
        """The statements prepared on this connection, by their SQL."""
        self._named = 0
        self._soon: RidingRows[Callable[[Connection], None]] = RidingRows(
            lambda: self.transaction(_nothing)
        )
        self.closed = False

    @classmethod
    async def open(cls, url: str) -> PostgresDatabase:
        """Connect; a clear StoreError when the server cannot be reached."""
        conn = await asyncio.to_thread(connect, url)
        return cls(url, conn)

    async def close(self) -> None:
        if self.closed:
            return
        await self.write_soon_rows()
        self.closed = True
        self._soon.close()
        try:
            await self._run(lambda conn: conn.close())
        finally:
            self._thread.shutdown(wait=False)

    # running ----------------------------------------------------------------------------

    async def _run(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``fn`` on the connection's thread, after the operations before it; psycopg's
        errors as the store's clear StoreError."""
        return await self._in_turn(functools.partial(self._on_thread, fn))

    async def _in_turn(self, operation: Callable[[], Awaitable[T]]) -> T:
        """Run ``operation`` holding the connection (one at a time, in the order asked), to
        its end even when the caller is cancelled (a stopped turn, a shutdown): a cancelled
        wait must never leave the connection in the middle of an exchange, its results
        unread or a pipeline open, nor let the next operation in while the thread still
        works on it. The caller stops waiting at once; what it asked for completes, or
        fails, unseen, as a unit of work on the thread always did."""
        done = asyncio.ensure_future(self._holding(operation))
        try:
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            done.add_done_callback(_unseen)
            raise

    async def _holding(self, operation: Callable[[], Awaitable[T]]) -> T:
        async with self._turn:
            return await operation()

    async def _on_thread(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, functools.partial(self._guarded, fn))

    def _guarded(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        if self._conn.closed and not self.closed:
            self._conn = connect(self.url)  # it broke: once more, for this operation
            self._rows = Rows(self._conn)
            self._binder = psycopg.ClientCursor(self._conn)
            self._dumper = Transformer.from_context(self._conn)
            self._prepared = {}
        try:
            return fn(self._conn)
        except psycopg.Error as exc:
            raise self._refused(exc) from None

    def _refused(self, exc: psycopg.Error) -> StoreError:
        if isinstance(exc, psycopg.OperationalError):
            return StoreError(
                f"lost the PostgreSQL database {self.where}: {_first_line(exc)}",
                hint="check that the server runs and CLAWBOT_DATABASE_URL names it",
            )
        return StoreError(
            f"the PostgreSQL database {self.where} refused: {_first_line(exc)}",
            hint="the server's log says more; `clawbot db status` shows the schema",
        )

    async def _statement(self, sql: str, params: Sequence[Any]) -> tuple[list[Any], int]:
        """One statement in autocommit, sent from the event loop: its rows and row count."""
        return await self._in_turn(functools.partial(self._send_statement, sql, params))

    async def _send_statement(self, sql: str, params: Sequence[Any]) -> tuple[list[Any], int]:
        conn = self._conn
        if conn.closed:  # reconnecting blocks: on the thread
            return await self._on_thread(functools.partial(_execute, sql=sql, params=params))
        statement = postgres(sql)
        text = self._binder.mogrify(statement.sql, tuple(params) or None)
        try:
            (result,) = await exchange(conn, text)
        except psycopg.Error as exc:
            raise self._refused(exc) from None
        error = failure(conn, [result])
        if error is not None:
            raise self._refused(error)
        rows = self._rows.of(result)
        if statement.returns_id:  # the id SQLite's lastrowid gives: nobody reads it here
            rows = rows[1:]
        changed = result.command_tuples
        return rows, changed if changed is not None else -1

    async def commit_statement(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """One statement (PostgreSQL's SQL, ``?`` placeholders) as a transaction of its own,
        in one round trip from the event loop: ``BEGIN``, the statement (prepared on this
        connection at its first use), the rows :meth:`soon` holds, ``COMMIT``; its rows,
        read once it committed. Should the server refuse it, it is rolled back and run
        again as a unit of work on the thread, which says why or drops a waiting row that
        failed."""
        return await self._in_turn(functools.partial(self._send_commit, sql, params))

    async def _send_commit(self, sql: str, params: Sequence[Any]) -> list[Any]:
        conn = self._conn
        if not conn.closed:
            if len(self._prepared) >= PREPARED_AT_MOST:
                await self._forget_prepared(conn)
            soon = self._soon.take()
            steps = [self._step(postgres(sql).sql, params)]
            if soon:  # in a savepoint of their own, as on the thread (batching)
                riding = Collected()
                for work in soon:
                    work(riding)
                steps += [
                    Step(f"SAVEPOINT {RIDING}".encode()),
                    *(self._step(*statement) for statement in riding.statements),
                    Step(f"RELEASE {RIDING}".encode()),
                ]
            main = steps[0].statement
            assert isinstance(main, Prepared)
            # its result comes after BEGIN's (with more than one step) and PREPARE's
            first = (1 if len(steps) > 1 else 0) + (0 if main.ready else 1)
            try:
                results = await transaction(conn, steps)
            except psycopg.Error as exc:
                raise self._refused(exc) from None
            prepared = [step.statement for step in steps]
            if failure(conn, results) is None:
                for statement in prepared:
                    if isinstance(statement, Prepared):
                        statement.ready = True
                return self._rows.of(results[first])
            self._soon.give_back(soon)
            names = []
            for statement in prepared:  # prepared or not: never used again
                if isinstance(statement, Prepared):
                    self._prepared.pop(statement.sql, None)
                    names.append(statement.name.decode())
            await self._on_thread(functools.partial(_rolled_back, names=names))
        cursor = await self._on_thread(
            functools.partial(self._transact, work=lambda db: db.execute(sql, params))
        )
        return cursor.fetchall()

    def _step(self, sql: str, params: Sequence[Any]) -> Step:
        """``sql`` (psycopg's format), prepared on this connection at its first use, with
        ``params`` as text."""
        found = self._prepared.get(sql)
        if found is None:
            self._named += 1
            found = self._prepared[sql] = Prepared(f"clawbot_{self._named}".encode(), sql)
        return Step(found, self._dumper.dump_sequence(params, [PyFormat.TEXT] * len(params)))

    async def _forget_prepared(self, conn: psycopg.Connection[Any]) -> None:
        """Free the statements this store prepared on the server (one round trip, once in
        ``PREPARED_AT_MOST`` new ones): a turn's end differs by its number of rows, so a
        long-running bot would otherwise keep preparing new ones for as long as it runs."""
        names = [p.name.decode() for p in self._prepared.values() if p.ready]
        self._prepared.clear()
        if names:
            try:
                results = await exchange(conn, "".join(f"DEALLOCATE {n};" for n in names))
            except psycopg.Error as exc:
                raise self._refused(exc) from None
            error = failure(conn, results)
            if error is not None:
                raise self._refused(error)

    async def run(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``fn`` with the raw psycopg connection (migrations, ``clawbot db``)."""
        return await self._run(fn)

    # the SqlDatabase protocol -------------------------------------------------------------

    async def fetchall(
        self, sql: str, params: Sequence[Any] = (), *, small: bool = False, flush: bool = True
    ) -> list[Any]:
        rows, _ = await self._statement(sql, params)
        return rows

    async def fetchone(
        self, sql: str, params: Sequence[Any] = (), *, small: bool = False, flush: bool = True
    ) -> Any:
        rows, _ = await self._statement(sql, params)
        return rows[0] if rows else None

    async def read(self, work: Callable[[Connection], T], *, flush: bool = True) -> T:
        return await self._run(lambda conn: work(PostgresConnection(conn)))

    async def write(self, sql: str, params: Sequence[Any]) -> int:
        """One statement, atomic on its own: committed in the same round trip."""
        _, rowcount = await self._statement(sql, params)
        return rowcount

    async def write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self.transaction(lambda db: db.executemany(sql, rows))

    async def transaction(self, work: Callable[[Connection], T], *, background: bool = False) -> T:
        """Run ``work`` as one transaction, committed or rolled back as a whole; the rows
        :meth:`soon` holds ride on it."""
        return await self._run(functools.partial(self._transact, work=work))

    async def grouped(self, work: Callable[[Connection], T]) -> T:
        """A transaction: PostgreSQL commits many connections' work at once itself."""
        return await self.transaction(work)

    async def flush(self) -> None:
        """Nothing waits in front of PostgreSQL: every commit is already visible."""
        return None

    def soon(self, work: Callable[[Connection], None]) -> None:
        """A row no caller waits for (a usage row): written with the next transaction,
        whichever it is, or in one of its own after ``SOON_WAIT`` when none comes (what a
        crash can lose of such rows, as on SQLite): it costs no round trip of its own."""
        self._soon.add(work)

    async def write_soon_rows(self) -> None:
        """Write the rows :meth:`soon` holds now: for a read of their table."""
        if self._soon:
            await self.transaction(_nothing)

    def _transact(self, conn: psycopg.Connection[Any], work: Callable[[Connection], T]) -> T:
        """On the connection's thread: ``work`` as one transaction, its statements sent in
        batches (``batching``), the waiting rows in a savepoint before the commit. Rows
        whose transaction failed wait for the next one; a row that fails is dropped."""
        soon = self._soon.take()
        batch = Batch(conn)
        try:
            result = work(BatchedConnection(batch))
            batch.commit(riding=soon)
        except BaseException:
            batch.abandon()
            self._soon.give_back(soon)
            raise
        return result


def _nothing(db: Connection) -> None:
    """The work of a transaction that carries only waiting rows."""


def _execute(
    conn: psycopg.Connection[Any], sql: str, params: Sequence[Any]
) -> tuple[list[Any], int]:
    """One statement in autocommit on the thread: its rows and row count."""
    statement = postgres(sql)
    cursor = conn.execute(statement.sql, tuple(params) or None)
    rows = cursor.fetchall() if cursor.description else []
    return (rows[1:] if statement.returns_id else rows), cursor.rowcount


def _unseen(done: asyncio.Future[Any]) -> None:
    """An operation its caller stopped waiting for ended: its failure, if any, is logged."""
    if not done.cancelled() and done.exception() is not None:
        log.warning("a database operation nobody waited for any more failed: %s", done.exception())


def _rolled_back(conn: psycopg.Connection[Any], names: Sequence[str]) -> None:
    """After a text the server refused midway: its transaction, if still open, rolled back,
    and those of its statements ``names`` that the server prepared before it refused freed
    (forgotten here, they would stay until the connection closes)."""
    if conn.pgconn.transaction_status in IN_TRANSACTION:
        conn.execute("ROLLBACK")
    held = conn.execute(
        "SELECT name FROM pg_prepared_statements WHERE name = ANY(%s)", (list(names),)
    ).fetchall()
    for (name,) in held:
        conn.execute(SQL("DEALLOCATE {}").format(Identifier(name)))


def connect(url: str) -> psycopg.Connection[Any]:
    """A connection in autocommit (units of work open their own transactions); a clear
    StoreError, never naming the password, when it cannot be made."""
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise StoreError(
            f"cannot connect to the PostgreSQL database {where(url)}: {_first_line(exc)}",
            hint="check that the server runs and CLAWBOT_DATABASE_URL names it",
        ) from None


def where(url: str) -> str:
    """``host:port/database`` of a URL, for messages: never its user's password."""
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(an unreadable URL)"
    return f"{parts.hostname or 'localhost'}{port}{parts.path or '/'}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
