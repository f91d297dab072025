"""Statements sent from the event loop itself, through libpq's non-blocking calls, with no
hop to the connection's worker thread and back.

The worker thread (``clawbot.store.postgres.database``) is what lets a unit of work, a plain
function that reads a result midway, run without blocking the loop. A statement that needs
nothing of the kind (a read, a single write, or a whole transaction already written as one
text: ``clawbot.store.postgres.turns``) does not need the thread, and the hop costs more
than the server's work here: handing the call to the thread, waking it, and waking the loop
again with the answer, two processes and two threads on two shared cores (about 0.3 ms a
hop inside the running bot, measured; docs/postgres.md). So such a text is sent here, and
the loop waits for the socket as it waits for any other."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, NamedTuple

import psycopg
from psycopg import pq
from psycopg.abc import Buffer
from psycopg.adapt import Transformer
from psycopg.pq.abc import PGresult

_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK, pq.ExecStatus.EMPTY_QUERY)
PREPARED_AT_MOST = 64
"""Statements prepared on one connection (a turn's end is one per number of rows)."""


async def exchange(conn: psycopg.Connection[Any], text: str) -> list[PGresult]:
    """Send ``text`` (one simple query: statements with their values bound on the client)
    and wait, on the event loop, for every result. The connection must be idle and used by
    nothing else meanwhile. Raises psycopg.OperationalError when the connection is lost."""
    pgconn = conn.pgconn
    pgconn.send_query(text.encode())
    async with _Socket(pgconn.socket) as socket:
        await socket.sent(pgconn)
        results: list[PGresult] = []
        while (result := await socket.result(pgconn)) is not None:
            results.append(result)
        return results


class Step(NamedTuple):
    """One statement of a transaction sent by :func:`transaction`: a prepared statement
    with its values (text), or a command with none (``SAVEPOINT``...)."""

    statement: Prepared | bytes
    values: Sequence[Buffer | None] = ()


async def transaction(conn: psycopg.Connection[Any], steps: Sequence[Step]) -> list[PGresult]:
    """``BEGIN``, the ``steps`` and ``COMMIT`` (a single step needs neither: it is a
    transaction of its own, committed at the pipeline's end), all sent at once in libpq's
    pipeline mode:
    one round trip, and statements the server planned once, at their first use, not at
    every send (a turn's end took 0.16 ms to plan, more than to run). Every result but the
    pipeline's end, in order (a statement prepared now adds its own before its result);
    waits on the event loop as :func:`exchange` does."""
    pgconn = conn.pgconn
    fd = pgconn.socket
    block = len(steps) > 1  # one statement alone commits at the pipeline's end
    pgconn.enter_pipeline_mode()
    try:
        if block:
            pgconn.send_query_params(b"BEGIN", None)
        for statement, values in steps:
            if isinstance(statement, bytes):
                pgconn.send_query_params(statement, None)
                continue
            if not statement.ready:
                pgconn.send_prepare(statement.name, statement.query, None)
            pgconn.send_query_prepared(statement.name, values, None)
        if block:
            pgconn.send_query_params(b"COMMIT", None)
        pgconn.pipeline_sync()
        async with _Socket(fd) as socket:
            await socket.sent(pgconn)
            results: list[PGresult] = []
            while True:
                result = await socket.result(pgconn)
                if result is None:  # one statement's results end
                    continue
                if result.status == pq.ExecStatus.PIPELINE_SYNC:
                    return results
                results.append(result)
    finally:
        if pgconn.status == pq.ConnStatus.OK:
            pgconn.exit_pipeline_mode()


class Prepared:
    """A statement (in psycopg's format: ``%s`` placeholders, ``%%`` for ``%``) prepared
    on a connection under ``name`` (``ready`` once the server has it), its placeholders
    numbered as the server's ``$1``, ``$2``..."""

    def __init__(self, name: bytes, sql: str) -> None:
        self.name = name
        self.sql = sql
        self.query = _numbered(sql).encode()
        self.ready = False


def _numbered(sql: str) -> str:
    """psycopg's ``%s`` as ``$1``, ``$2``..., in order, and ``%%`` as ``%``."""
    parts = sql.split("%%")
    count = 0
    for index, part in enumerate(parts):
        pieces = part.split("%s")
        numbered = [pieces[0]]
        for piece in pieces[1:]:
            count += 1
            numbered.append(f"${count}{piece}")
        parts[index] = "".join(numbered)
    return "%".join(parts)


class _Socket:
    """The connection's socket watched by the event loop for one exchange: registered
    once, however many times the exchange waits for it (each registration is a system
    call and the loop's bookkeeping)."""

    def __init__(self, fd: int) -> None:
        self._loop = asyncio.get_running_loop()
        self._fd = fd
        self._waiting: asyncio.Future[None] | None = None
        self._reading = self._writing = False

    async def __aenter__(self) -> _Socket:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._reading:
            self._loop.remove_reader(self._fd)
        if self._writing:
            self._loop.remove_writer(self._fd)

    async def sent(self, pgconn: pq.abc.PGconn) -> None:
        """Until libpq has handed all it queued to the socket."""
        while pgconn.flush():  # 1: more to send once the socket takes it
            await self.writable()

    async def result(self, pgconn: pq.abc.PGconn) -> PGresult | None:
        """The next result, read as it arrives; None where a statement's results end."""
        pgconn.consume_input()
        while pgconn.is_busy():
            await self.readable()
            pgconn.consume_input()
        return pgconn.get_result()

    def _wake(self) -> None:
        if self._waiting is not None and not self._waiting.done():
            self._waiting.set_result(None)

    async def readable(self) -> None:
        if not self._reading:
            self._loop.add_reader(self._fd, self._wake)
            self._reading = True
        await self._wait()

    async def writable(self) -> None:
        if not self._writing:
            self._loop.add_writer(self._fd, self._wake)
            self._writing = True
        await self._wait()
        self._loop.remove_writer(self._fd)  # writable nearly always: not kept
        self._writing = False

    async def _wait(self) -> None:
        self._waiting = self._loop.create_future()
        try:
            await self._waiting
        finally:
            self._waiting = None


def failure(conn: psycopg.Connection[Any], results: list[PGresult]) -> psycopg.Error | None:
    """The error the server answered with, as psycopg would raise it; None when every
    statement ran."""
    for result in results:
        if result.status == pq.ExecStatus.FATAL_ERROR:
            return psycopg.errors.error_from_result(result, encoding=conn.info.encoding)
    for result in results:
        if result.status not in _OK:
            return psycopg.errors.error_from_result(result, encoding=conn.info.encoding)
    return None


class Rows:
    """Reads a result's rows as psycopg's cursors do (one loader per connection)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._loader = Transformer.from_context(conn)

    def of(self, result: PGresult) -> list[Any]:
        if result.status != pq.ExecStatus.TUPLES_OK:
            return []
        self._loader.set_pgresult(result)
        return self._loader.load_rows(0, result.ntuples, tuple)
