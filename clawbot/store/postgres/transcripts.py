"""What the model sees of a session's transcript, read on PostgreSQL in one round trip.

The shared repository (``clawbot.store.sessions``) reads the latest compaction's summary
and then the entries no compaction summarized: two reads, two round trips to the server
(the first turn of every session in a process makes them). Here both are one statement:
the summary, a single row, joined to the entries."""

from __future__ import annotations

from clawbot.store.records import LiveTranscript
from clawbot.store.sessions import _ENTRY_COLUMNS, SqlTranscripts, _stored

_ENTRIES = ", ".join(f"m.{column.strip()}" for column in _ENTRY_COLUMNS.split(","))
_LIVE = (
    f"SELECT s.summary, m.id, {_ENTRIES} FROM"
    " (SELECT (SELECT summary FROM compactions WHERE session_key = ? AND epoch = ?"
    "   ORDER BY id DESC LIMIT 1) AS summary) AS s"
    " LEFT JOIN LATERAL (SELECT id, {columns} FROM messages"
    "   WHERE session_key = ? AND epoch = ? AND compaction_id IS NULL"
    "   ORDER BY id DESC{limit}) AS m ON true"
    " ORDER BY m.id DESC"
)


class PostgresTranscripts(SqlTranscripts):
    """The shared transcripts repository, but for :meth:`live`: one round trip."""

    async def live(self, key: str, epoch: int, limit: int | None = None) -> LiveTranscript:
        sql = _LIVE.format(columns=_ENTRY_COLUMNS, limit=" LIMIT ?" if limit is not None else "")
        params = (key, epoch, key, epoch) + ((limit,) if limit is not None else ())
        rows = await self._database.fetchall(sql, params, small=limit is not None)
        summary = rows[0][0] if rows else None
        entries = tuple(_stored(*row[1:]) for row in reversed(rows) if row[1] is not None)
        return LiveTranscript(
            summary=str(summary) if summary is not None else None, entries=entries
        )
