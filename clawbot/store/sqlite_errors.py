"""What SQLite's errors mean to the store: a lock another process holds, which a read or a
write waits out for a while (:func:`retrying`), and the clear StoreError a user sees for
the rest (:func:`describe`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from clawbot.errors import StoreError

BUSY_WAIT = 5.0
"""Seconds a write waits for another process's write lock before it fails."""
T = TypeVar("T")


def is_busy(exc: BaseException) -> bool:
    """Another connection holds the lock (SQLITE_BUSY or SQLITE_LOCKED, extended or not)."""
    code = getattr(exc, "sqlite_errorcode", None)  # absent when raised outside SQLite
    if not isinstance(exc, sqlite3.OperationalError) or code is None:
        return False
    return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def describe(exc: sqlite3.DatabaseError, path: Path) -> StoreError:
    """The StoreError a user sees for a database error: what went wrong and what to do."""
    text = str(exc)
    if is_busy(exc):
        return StoreError(
            f"the database {path} stayed locked by another process for {BUSY_WAIT:g} s ({text})",
            hint="check that no other clawbot runs on the same CLAWBOT_HOME, then try again",
        )
    if "not a database" in text or "malformed" in text:
        return damaged(path, text)
    if "readonly" in text or "read-only" in text:
        return StoreError(
            f"the database {path} is read-only ({text})",
            hint="make the file and its folder writable, or point CLAWBOT_HOME elsewhere",
        )
    return StoreError(f"database error on {path}: {text}")


def damaged(path: Path, detail: str) -> StoreError:
    """The StoreError for a database file SQLite cannot read as one: where, and what to do."""
    return StoreError(
        f"the database {path} is damaged or not a clawbot database ({detail})",
        hint="move the file aside (or restore a backup) and clawbot will create a fresh one",
    )


async def retrying(attempt: Callable[[], Awaitable[T]]) -> T:
    """``attempt()``, tried again while the database is locked by another process."""
    try:
        return await attempt()
    except sqlite3.OperationalError as exc:
        if not is_busy(exc):
            raise
    from tenacity import (
        AsyncRetrying,
        retry_if_exception,
        stop_after_delay,
        wait_exponential,
    )

    async for retry in AsyncRetrying(
        retry=retry_if_exception(is_busy),
        stop=stop_after_delay(BUSY_WAIT),
        wait=wait_exponential(multiplier=0.001, max=0.05),
        reraise=True,
    ):
        with retry:
            return await attempt()
    raise AssertionError("unreachable: tenacity reraises the last failure")
