"""A unit of work on PostgreSQL in as few round trips as its reads allow.

A unit of work (a plain function of the connection, as the repositories write them) issues
its statements one by one, but reads the result of few of them. Sent one by one, every
statement, the ``BEGIN`` and the ``COMMIT`` is a round trip to the server, and here a round
trip costs more than the statement (about 250 us inside the running bot against 30 to 70 us
of execution; docs/postgres.md). So the statements are queued, their parameters bound on
the client (psycopg's own quoting, ``ClientCursor.mogrify``), and sent together, ``BEGIN``
first, when a result is first read or at the commit, which rides with the last of them.
(A message's intake and a turn's end, which read a row count midway here, are one statement
each in PostgreSQL's store: ``clawbot.store.postgres.turns``.)

What changes for a unit of work is only *when* a statement runs: in order, before any
result is read and before the commit. An error in one (a violated constraint) is raised
where the batch that carried it is sent, which ends the unit of work as the error would
have at the statement; the transaction is rolled back either way."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import pq

from clawbot.store.postgres.dialect import postgres

if TYPE_CHECKING:
    from clawbot.store.sql import Connection

IN_TRANSACTION = (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR)
RIDING = "clawbot_riding"
"""The savepoint of the rows riding on a commit."""
log = logging.getLogger(__name__)


class PendingCursor:
    """A statement's result (``sqlite3.Cursor``'s surface), there once its batch was sent:
    reading any of it sends the batch."""

    def __init__(self, batch: Batch, returns_id: bool, statements: int = 1) -> None:
        self._batch = batch
        self._returns_id = returns_id
        self.statements = statements
        self._rows: list[Any] = []
        self._rowcount = -1
        self._lastrowid: int | None = None
        self.settled = False

    def settle(self, rows: list[Any], rowcount: int) -> None:
        """The result, as the server sent it (``rowcount`` summed over an executemany)."""
        if self._returns_id and rows:
            self._lastrowid = int(rows[0][0])
            rows = rows[1:]
        self._rows, self._rowcount, self.settled = rows, rowcount, True

    def _settled(self) -> None:
        if not self.settled:
            self._batch.send()

    @property
    def rowcount(self) -> int:
        self._settled()
        return self._rowcount

    @property
    def lastrowid(self) -> int | None:
        self._settled()
        return self._lastrowid

    def fetchone(self) -> Any:
        self._settled()
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list[Any]:
        self._settled()
        rows, self._rows = self._rows, []
        return rows


class Batch:
    """The statements of one transaction waiting to be sent, and what was sent so far."""

    def __init__(
        self, conn: psycopg.Connection[Any], cursor: psycopg.ClientCursor[Any] | None = None
    ) -> None:
        self._conn = conn
        self._cursor = cursor if cursor is not None else psycopg.ClientCursor(conn)
        self._queued: list[str] = []
        self._waiting: list[PendingCursor] = []
        self.begun = False

    def add(self, sql: str, parameters: Sequence[Any]) -> PendingCursor:
        statement = postgres(sql)
        pending = PendingCursor(self, statement.returns_id)
        self._queued.append(self._bound(statement.sql, parameters))
        self._waiting.append(pending)
        return pending

    def add_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> PendingCursor:
        statement = postgres(sql, many=True)
        pending = PendingCursor(self, False, statements=len(rows))
        if not rows:
            pending.settle([], 0)
            return pending
        self._queued.extend(self._bound(statement.sql, row) for row in rows)
        self._waiting.append(pending)
        return pending

    def _bound(self, sql: str, parameters: Sequence[Any]) -> str:
        text = self._cursor.mogrify(sql, tuple(parameters) or None)
        return text.rstrip().rstrip(";")

    def send(self, *, commit: bool = False) -> None:
        """Send what is queued (after ``BEGIN`` if this is the transaction's first send,
        and with ``COMMIT`` after it if asked) in one round trip; settle every result."""
        if not self._queued and not (commit and self.begun):
            return
        statements = list(self._queued)
        lead = 0 if self.begun else 1
        if not self.begun:
            statements.insert(0, "BEGIN")
        if commit:
            statements.append("COMMIT")
        waiting, self._queued, self._waiting = self._waiting, [], []
        self.begun = True
        cursor = self._cursor
        cursor.execute(";\n".join(statements))  # each ends its line: a -- comment stays one
        for _ in range(lead):
            cursor.nextset()
        for pending in waiting:
            if pending.statements == 1:
                pending.settle(cursor.fetchall() if cursor.description else [], cursor.rowcount)
                cursor.nextset()
                continue
            rows: list[Any] = []
            rowcount = 0
            for _ in range(pending.statements):  # an executemany: its rows' counts summed
                rows += cursor.fetchall() if cursor.description else []
                rowcount += max(cursor.rowcount, 0)
                cursor.nextset()
            pending.settle(rows, rowcount)

    def commit(self, riding: Sequence[Callable[[Connection], None]] = ()) -> None:
        """Send the rest with ``COMMIT``. The ``riding`` rows (no caller waits for them: a
        usage row) go in a savepoint of their own just before it: one that fails is dropped
        and logged, and the unit of work commits without them."""
        if not riding:
            self.send(commit=True)
            return
        self._queued.append(f"SAVEPOINT {RIDING}")
        for work in riding:
            work(BatchedConnection(self))
        self._queued.append(f"RELEASE {RIDING}")
        try:
            self.send(commit=True)
        except psycopg.Error as exc:
            if not self._without_riding():
                raise
            log.error("%d rows no caller waited for could not be written: %s", len(riding), exc)

    def _without_riding(self) -> bool:
        """After a failed send: undo the riding rows and commit the rest, when the failure
        was theirs (their savepoint exists only if every statement before it ran)."""
        if self._conn.pgconn.transaction_status != pq.TransactionStatus.INERROR:
            return False
        try:
            self._conn.execute(f"ROLLBACK TO SAVEPOINT {RIDING};\nRELEASE {RIDING};\nCOMMIT")
        except psycopg.Error:
            return False
        return True

    def abandon(self) -> None:
        """After a failure: the server's transaction, if one is open, rolled back."""
        self._queued, self._waiting = [], []
        if self._conn.pgconn.transaction_status in IN_TRANSACTION:
            self._conn.execute("ROLLBACK")


class BatchedConnection:
    """The :class:`~clawbot.store.sql.Connection` a unit of work is given on PostgreSQL:
    its statements queued on a :class:`Batch`."""

    def __init__(self, batch: Batch) -> None:
        self._batch = batch

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> PendingCursor:
        return self._batch.add(sql, parameters)

    def executemany(self, sql: str, parameters: Sequence[Sequence[Any]], /) -> PendingCursor:
        return self._batch.add_many(sql, parameters)


class Collected:
    """A :class:`~clawbot.store.sql.Connection` that only collects the statements given it
    (PostgreSQL's dialect, with their values), for rows no caller waits for, which read
    nothing back: sent later, prepared (``clawbot.store.postgres.loop``)."""

    def __init__(self) -> None:
        self.statements: list[tuple[str, Sequence[Any]]] = []

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> PendingCursor:
        self.statements.append((postgres(sql).sql, tuple(parameters)))
        return _UNREAD

    def executemany(self, sql: str, parameters: Sequence[Sequence[Any]], /) -> PendingCursor:
        statement = postgres(sql, many=True).sql
        self.statements += [(statement, tuple(row)) for row in parameters]
        return _UNREAD


class _Unread(PendingCursor):
    """What a collected statement gives back: nothing is read from it."""

    def __init__(self) -> None:
        super().__init__(batch=None, returns_id=False)  # type: ignore[arg-type]
        self.settled = True


_UNREAD = _Unread()
