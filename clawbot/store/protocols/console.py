"""The repository of the web console: its login token and the browsers logged in with it
(hashes only), and the list of sessions its first page shows."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from clawbot.store.records import ConsoleLogin, SessionOverview


class Console(Protocol):
    """The console's logins (see ``clawbot.console.auth``) and its session list."""

    async def set_token(self, token_hash: str, at: datetime) -> None:
        """Make ``token_hash`` the one login token (a new console start replaces the last)."""
        ...

    async def token_hash(self) -> str | None: ...

    async def open_login(
        self, session_hash: str, csrf_token: str, at: datetime, expires_at: datetime
    ) -> None:
        """Remember a browser that logged in (its cookie's hash)."""
        ...

    async def login(self, session_hash: str, now: datetime) -> ConsoleLogin | None:
        """The login of this cookie's hash while it has not expired; None otherwise."""
        ...

    async def close_login(self, session_hash: str) -> None: ...

    async def overview(
        self, search: str = "", *, limit: int = 50, offset: int = 0
    ) -> list[SessionOverview]:
        """Sessions whose key, channel, agent or model holds ``search`` (any case), the
        latest active first."""
        ...
