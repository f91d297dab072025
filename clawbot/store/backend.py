"""Which store a configuration opens, set up as the bot uses it. The one place outside the
store's own modules that names a backend: callers hold a :class:`Store`.
``CLAWBOT_DATABASE_URL=postgresql://...`` selects PostgreSQL; without it, SQLite."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlsplit

from clawbot.errors import StoreError
from clawbot.settings import Settings
from clawbot.store.interface import Store
from clawbot.store.protocols.memories import Embedder
from clawbot.store.sqlite import SqliteStore

POSTGRES_SCHEMES = ("postgresql", "postgres")


def database_url(settings: Settings) -> str:
    """The URL of the database the settings name: ``CLAWBOT_DATABASE_URL``, or the SQLite
    file in the home folder as ``sqlite:///...``."""
    if settings.database_url is not None:
        return settings.database_url.get_secret_value()
    path = settings.db_path.absolute()
    return f"sqlite://{path.as_posix()}"


def database_name(settings: Settings) -> str:
    """The database the settings name, for a person: the SQLite file's path, or
    ``postgresql host:port/database`` (never a password)."""
    url = database_url(settings)
    parts = urlsplit(url)
    if parts.scheme not in POSTGRES_SCHEMES:
        return str(settings.db_path if settings.database_url is None else sqlite_path(url))
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"postgresql {parts.hostname or 'localhost'}{port}{parts.path}"


def sqlite_path(url: str) -> Path | None:
    """The file a ``sqlite:///path`` URL names (``sqlite:////path`` too, SQLAlchemy's
    spelling of an absolute path); None for any other URL."""
    parts = urlsplit(url)
    if parts.scheme != "sqlite":
        return None
    path = unquote(parts.path)
    return Path(path[1:] if path.startswith("//") else path)


class LeaderLock(Protocol):
    """The lock of one platform connection allowed once per bot at a time (Telegram's long
    polling): among the processes sharing a database, the one holding it opens the
    connection. The server frees it when its holder dies (``clawbot.store.postgres.leader``)."""

    name: str

    @property
    def held(self) -> bool: ...

    async def try_take(self) -> bool: ...

    async def still_held(self, timeout: float) -> bool: ...

    async def holder(self) -> str | None: ...

    async def release(self) -> None: ...


LeaderLocks = Callable[[str], LeaderLock]
"""Makes the leader lock of a connection's name."""


def leader_locks(settings: Settings, command: str) -> LeaderLocks | None:
    """On PostgreSQL, where several processes may serve one database, the leader locks of
    exclusive platform connections; None on SQLite, whose one serving process per home
    (``clawbot.cli.serving``) holds every connection itself."""
    url = database_url(settings)
    if urlsplit(url).scheme not in POSTGRES_SCHEMES:
        return None
    from clawbot.store.postgres.leader import PostgresLeaderLock

    return lambda name: PostgresLeaderLock(url, name, command)


def serves_alone(settings: Settings) -> bool:
    """Whether the settings' database is served by one process (SQLite: the home's serving
    lock refuses a second one) rather than shared (PostgreSQL)."""
    return urlsplit(database_url(settings)).scheme not in POSTGRES_SCHEMES


async def open_url(url: str, *, synchronous: str = "NORMAL", migrating: bool = True) -> Store:
    """Open (and, ``migrating``, bring up to date) the store a database URL names."""
    if urlsplit(url).scheme in POSTGRES_SCHEMES:
        try:
            from clawbot.store.postgres.store import PostgresStore
        except ImportError:
            raise StoreError(
                "CLAWBOT_DATABASE_URL names a PostgreSQL database, but its driver (psycopg)"
                " is not installed",
                hint="pip install 'clawbot[postgres]' (from the source folder: pip install"
                " '.[postgres]')",
            ) from None
        return await PostgresStore.open(url, migrating=migrating)
    path = sqlite_path(url)
    if path is None:
        raise StoreError(
            "a database URL must start with postgresql:// or sqlite:///",
            hint="e.g. sqlite:///home/me/.clawbot/clawbot.db",
        )
    return await SqliteStore.open(path, synchronous=synchronous)


async def open_store(settings: Settings, embedder: Embedder | None = None) -> Store:
    """Open (creating and migrating if needed) the store the settings name, with semantic
    recall's embedding model when one is given (``clawbot.memory.embeddings``'
    ``configured_embedder``; nothing loads until its first use); the store's clear
    StoreError when it cannot open."""
    store = await open_url(database_url(settings), synchronous=settings.db_synchronous)
    store.memories.use_embeddings(embedder)
    return store
