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
from typing import Any

import psycopg
from psycopg import pq
from psycopg.adapt import Transformer
from psycopg.pq.abc import PGresult

_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK, pq.ExecStatus.EMPTY_QUERY)


async def exchange(conn: psycopg.Connection[Any], text: str) -> list[PGresult]:
    """Send ``text`` (one simple query: statements with their values bound on the client)
    and wait, on the event loop, for every result. The connection must be idle and used by
    nothing else meanwhile. Raises psycopg.OperationalError when the connection is lost."""
    pgconn = conn.pgconn
    fd = pgconn.socket
    pgconn.send_query(text.encode())
    while pgconn.flush():  # 1: more to send once the socket takes it
        await _ready(fd, writing=True)
    results: list[PGresult] = []
    while True:
        pgconn.consume_input()
        while pgconn.is_busy():
            await _ready(fd, writing=False)
            pgconn.consume_input()
        result = pgconn.get_result()
        if result is None:
            return results
        results.append(result)


async def _ready(fd: int, *, writing: bool) -> None:
    loop = asyncio.get_running_loop()
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    if writing:
        loop.add_writer(fd, wake)
    else:
        loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        if writing:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


def failure(conn: psycopg.Connection[Any], results: list[PGresult]) -> psycopg.Error | None:
    """The error the server answered with (the first), as psycopg would raise it; None when
    every statement ran."""
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
