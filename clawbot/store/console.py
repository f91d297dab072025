"""The web console's logins (``console_token``, ``console_logins``) and its session list."""

from __future__ import annotations

import builtins
import sqlite3
from datetime import datetime

from clawbot.store.database import Database
from clawbot.store.records import ConsoleLogin, SessionOverview


def _like(text: str) -> str:
    """``text`` as a LIKE pattern that matches it anywhere, its wildcards taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class SqliteConsole:
    """See :class:`clawbot.store.protocols.console.Console`."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def set_token(self, token_hash: str, at: datetime) -> None:
        await self._database.write(
            "INSERT INTO console_token (id, token_hash, created_at) VALUES (1, ?, ?)"
            " ON CONFLICT (id) DO UPDATE SET token_hash = excluded.token_hash,"
            " created_at = excluded.created_at",
            (token_hash, at.isoformat()),
        )

    async def token_hash(self) -> str | None:
        row = await self._database.fetchone(
            "SELECT token_hash FROM console_token WHERE id = 1", small=True
        )
        if row is None:
            return None
        (token_hash,) = row
        return str(token_hash)

    async def open_login(
        self, session_hash: str, csrf_token: str, at: datetime, expires_at: datetime
    ) -> None:
        def write(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM console_logins WHERE expires_at < ?", (at.isoformat(),))
            db.execute(
                "INSERT INTO console_logins (session_hash, csrf_token, created_at, expires_at)"
                " VALUES (?, ?, ?, ?)",
                (session_hash, csrf_token, at.isoformat(), expires_at.isoformat()),
            )

        await self._database.transaction(write)

    async def login(self, session_hash: str, now: datetime) -> ConsoleLogin | None:
        row = await self._database.fetchone(
            "SELECT csrf_token, expires_at FROM console_logins WHERE session_hash = ?",
            (session_hash,),
            small=True,
        )
        if row is None:
            return None
        csrf_token, expires = row
        expires_at = datetime.fromisoformat(expires)
        return ConsoleLogin(str(csrf_token), expires_at) if expires_at > now else None

    async def close_login(self, session_hash: str) -> None:
        await self._database.write(
            "DELETE FROM console_logins WHERE session_hash = ?", (session_hash,)
        )

    async def overview(
        self, search: str = "", *, limit: int = 50, offset: int = 0
    ) -> builtins.list[SessionOverview]:
        where, params = "", []
        if search.strip():
            pattern = _like(search.strip().lower())
            where = (
                " WHERE lower(s.key) LIKE ? ESCAPE '\\' OR lower(s.channel) LIKE ? ESCAPE '\\'"
                " OR lower(s.agent_id) LIKE ? ESCAPE '\\'"
                " OR lower(coalesce(s.model_override, '')) LIKE ? ESCAPE '\\'"
            )
            params = [pattern] * 4
        rows = await self._database.fetchall(
            "SELECT s.key, s.channel, s.chat_type, s.agent_id, s.model_override, s.owner_key,"
            " s.epoch, (SELECT count(*) FROM messages m WHERE m.session_key = s.key),"
            " (SELECT max(m.id) FROM messages m WHERE m.session_key = s.key) AS latest,"
            " (SELECT m.created_at FROM messages m WHERE m.session_key = s.key"
            "  ORDER BY m.id DESC LIMIT 1)"
            f" FROM sessions s{where}"
            " ORDER BY latest IS NULL, latest DESC, s.key LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        return [
            SessionOverview(
                key=key,
                channel=channel,
                chat_type=chat_type,
                agent_id=agent_id,
                model_override=model,
                owner_key=owner,
                epoch=int(epoch),
                messages=int(count),
                last_activity=datetime.fromisoformat(last) if last else None,
            )
            for key, channel, chat_type, agent_id, model, owner, epoch, count, _, last in rows
        ]
