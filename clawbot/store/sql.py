"""What the repositories (``clawbot.store.sessions``, ``jobs``, ``memories``...) ask of a
database, whichever engine it is: a :class:`SqlDatabase` that runs their SQL, and the
:class:`Connection` a unit of work is given inside a transaction. The SQL they write is
SQLite's, with ``?`` placeholders; a backend whose dialect differs (PostgreSQL,
``clawbot.store.postgres.dialect``) rewrites it, so the repositories are written once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Cursor(Protocol):
    """What a statement gives back: its rows, how many it changed, the id it inserted."""

    @property
    def rowcount(self) -> int: ...
    @property
    def lastrowid(self) -> int | None: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """The connection a unit of work runs its statements on, inside one transaction."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...
    def executemany(self, sql: str, parameters: Sequence[Sequence[Any]], /) -> Cursor: ...


class SqlDatabase(Protocol):
    """One database the repositories run their SQL on: reads, single statements, and units
    of work (functions of a :class:`Connection`) committed or rolled back as a whole."""

    async def fetchone(
        self, sql: str, params: Sequence[Any] = (), *, small: bool = False, flush: bool = True
    ) -> Any: ...

    async def fetchall(
        self, sql: str, params: Sequence[Any] = (), *, small: bool = False, flush: bool = True
    ) -> list[Any]: ...

    async def read(self, work: Callable[[Connection], T], *, flush: bool = True) -> T: ...

    async def write(self, sql: str, params: Sequence[Any]) -> int: ...

    async def write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    async def transaction(
        self, work: Callable[[Connection], T], *, background: bool = False
    ) -> T: ...

    async def grouped(self, work: Callable[[Connection], T]) -> T: ...

    def soon(self, work: Callable[[Connection], None]) -> None:
        """Write ``work`` soon, with no caller waiting for it (a usage row)."""

    async def write_soon_rows(self) -> None:
        """Wait until what :meth:`soon` was given is written (before a read of it)."""
