"""One serving process per PostgreSQL database, for now. The home's serving lock
(``clawbot.cli.serving``) is a file, so two homes pointing at one database would both serve
and each run turns of the same conversation. Until several processes share a database
(jobs claimed from it, a later step), a serving process holds a PostgreSQL advisory lock on a
connection of its own: the server frees it when that connection ends, even when the process
is killed, so a crash never leaves it behind."""

from __future__ import annotations

import os
import socket
from typing import Any

import psycopg

from clawbot.errors import StoreError
from clawbot.store.postgres.database import connect, where

SERVING = 0x636C6177_5E57
"""The advisory lock a serving process holds ("claw", "serve")."""


class DatabaseServedError(StoreError):
    """Another clawbot process serves from the same PostgreSQL database."""


class PostgresServingLock:
    """The held lock; ``release`` frees it (closing its connection)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn: psycopg.Connection[Any] | None = conn

    @classmethod
    def acquire(cls, url: str, command: str) -> PostgresServingLock:
        """Take the lock for ``command``, or raise :class:`DatabaseServedError` naming the
        process that holds it (its ``application_name``)."""
        conn = connect(url)
        try:
            me = f"{command} pid {os.getpid()} on {socket.gethostname()}"
            conn.execute("SELECT set_config('application_name', %s, false)", (me[:63],))
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (SERVING,)).fetchone()
            if row is None or not row[0]:
                holder = conn.execute(
                    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a"
                    " ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted"
                    " AND (l.classid::bigint << 32 | l.objid::bigint) = %s",
                    (SERVING,),
                ).fetchone()
                who = f"`{holder[0]}`" if holder and holder[0] else "another clawbot"
                raise DatabaseServedError(
                    f"{who} is already serving the PostgreSQL database {where(url)}; two"
                    " serving processes on one database would mix the turns of a conversation",
                    hint="stop that one first, or give this one a database of its own"
                    " (several processes on one database are not supported yet)",
                )
        except BaseException:
            conn.close()
            raise
        return cls(conn)

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
