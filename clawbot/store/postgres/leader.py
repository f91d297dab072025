"""The leader lock of one exclusive platform connection, on PostgreSQL.

Some platform connections are allowed once per bot at a time: Telegram answers a second
``getUpdates`` for one bot with 409 Conflict. Processes that share a database hold such a
connection through this lock, so exactly one of them opens it. It is a session-level advisory
lock keyed by a hash of the connection's name (never a secret: ``telegram polling bot 123``),
held on a connection of its own: the server frees it when that connection ends, even when
the process is SIGKILLed, and another process takes it at its next try.

The connection's ``application_name`` says which process holds the lock, so a process that
waits, and ``clawbot doctor``, can name the leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import socket
from typing import Any

import psycopg

CONNECT_TIMEOUT = 10
"""Seconds to wait for the database when trying to take the lock."""


def lock_key(name: str) -> int:
    """The advisory lock's 64-bit key for a connection's name (signed, as PostgreSQL's
    ``bigint``): a hash, so any name fits and two names meet only by a 1 in 2^64 chance."""
    digest = hashlib.blake2b(f"clawbot leader: {name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def process_label(command: str) -> str:
    """How a process names itself to the database (``application_name``, 63 bytes at most)."""
    return f"{command} pid {os.getpid()} on {socket.gethostname()}"[:63]


HOLDER_QUERY = (
    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND ((l.classid::bigint << 32) | l.objid::bigint) = %s"
)
"""Who holds a lock: ``pg_locks`` shows a bigint key as its two 32-bit halves."""


class PostgresLeaderLock:
    """The lock of the exclusive connection ``name``; tried, watched and released by one
    asyncio task (``clawbot.cli.leadership``)."""

    def __init__(self, url: str, name: str, command: str) -> None:
        self._url = url
        self.name = name
        self._key = lock_key(name)
        self._label = process_label(command)
        self._conn: psycopg.AsyncConnection[Any] | None = None
        """Kept between tries too, so a waiting process does not connect anew each time."""
        self._held = False

    def __repr__(self) -> str:  # the URL may hold a password
        return f"PostgresLeaderLock({self.name!r}, held={self.held})"

    @property
    def held(self) -> bool:
        return self._held

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = await psycopg.AsyncConnection.connect(
                self._url,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT,
                application_name=self._label,
            )
        return self._conn

    async def try_take(self) -> bool:
        """Take the lock if no process holds it; False when another does or the database
        cannot be reached (the next try may succeed)."""
        if self._held:
            return True
        try:
            conn = await self._connection()
            cursor = await conn.execute("SELECT pg_try_advisory_lock(%s)", (self._key,))
            row = await cursor.fetchone()
        except psycopg.Error:
            await self.release()
            return False
        self._held = bool(row and row[0])
        return self._held

    async def still_held(self, timeout: float) -> bool:
        """Whether the lock's connection is alive (then the server keeps the lock); False,
        and the lock let go of, when it ended or did not answer within ``timeout``."""
        if not self._held or self._conn is None:
            return False
        try:
            async with asyncio.timeout(timeout):
                await self._conn.execute("SELECT 1")
        except (psycopg.Error, TimeoutError):
            await self.release()
            return False
        return True

    async def holder(self) -> str | None:
        """The ``application_name`` of the process that holds the lock (None: nobody, or
        the database could not say)."""
        try:
            conn = await self._connection()
            row = await (await conn.execute(HOLDER_QUERY, (self._key,))).fetchone()
        except psycopg.Error:
            await self.release()
            return None
        return str(row[0]) if row and row[0] else None

    async def release(self) -> None:
        """Let go of the lock (closing its connection frees it); safe to call twice."""
        conn, self._conn, self._held = self._conn, None, False
        if conn is not None:
            with contextlib.suppress(psycopg.Error):  # broken: the server freed it already
                await conn.close()
