"""A chat's session opened on PostgreSQL in one round trip.

The shared repository (``clawbot.store.sessions``) reads the session and, for a chat never
seen, inserts it: two round trips to the server for every new chat. Here both are one
statement, a data-modifying ``WITH``: the row is inserted unless its key exists, and the
stored one is read beside it (the statement's snapshot does not see its own insert, so
exactly one of the two gives a row)."""

from __future__ import annotations

from clawbot.routing.sessions import Session
from clawbot.store.records import OpenedSession
from clawbot.store.rows import now
from clawbot.store.sessions import _SESSION_COLUMNS, SqlSessions, _session, session_row

_STORED = ", ".join(f"s.{column.strip()}" for column in _SESSION_COLUMNS.split(","))
_OPEN = (
    f"WITH inserted AS (INSERT INTO sessions ({_SESSION_COLUMNS}, created_at, updated_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING"
    " RETURNING key)"
    f" SELECT EXISTS (SELECT 1 FROM inserted), {_STORED}"
    " FROM (SELECT 1) AS one LEFT JOIN sessions AS s ON s.key = ?"
)
"""Always one row: inserted now (true, no stored row: the snapshot predates the insert),
or the stored row (false, the row), or neither when another process inserted the key
while this statement ran (false, no row)."""


class PostgresSessions(SqlSessions):
    """The shared sessions repository, but for :meth:`open`: one round trip."""

    async def open(self, session: Session) -> OpenedSession:
        created, *stored = await self._database.fetchone(
            _OPEN, (*session_row(session, now()), session.key), small=True
        )
        if created:
            return OpenedSession(session, created=True)
        if stored[0] is not None:
            return OpenedSession(_session(stored), created=False)
        found = await self.get(session.key)  # inserted by another process meanwhile
        assert found is not None  # sessions are never deleted
        return OpenedSession(found, created=False)
