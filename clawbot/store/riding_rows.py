"""Rows no caller waits for (a usage row): each database holds them until its next
transaction takes them, whatever that transaction is, or commits them in one of their own
after ``SOON_WAIT`` when none comes. Such a row costs an insert in a commit already paid
for; a crash can lose what waited (at most ``SOON_WAIT`` of them). One holder for both
backends: SQLite's and PostgreSQL's transactions take from it, each on its own thread."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)
SOON_WAIT = 1.0
"""Seconds a row nobody waits for waits for a transaction to ride on before it commits
on its own (what a crash can lose of such rows)."""
W = TypeVar("W")


class RidingRows(Generic[W]):
    """The waiting rows of one database and the timer that commits them when no
    transaction comes. ``commit_alone`` runs a transaction with no work of its own (the
    database's transactions take the rows with :meth:`take`)."""

    def __init__(self, commit_alone: Callable[[], Awaitable[Any]]) -> None:
        self._commit_alone = commit_alone
        self._rows: list[W] = []
        self._lock = threading.Lock()  # take and give_back run on the database's thread
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._committing: asyncio.Future[Any] | None = None
        self._closed = False

    def __bool__(self) -> bool:
        return bool(self._rows)

    def add(self, row: W) -> None:
        """On the event loop: hold ``row`` for the next transaction."""
        with self._lock:
            self._rows.append(row)
        self._loop = asyncio.get_running_loop()
        self._arm()

    def take(self) -> list[W]:
        """The rows waiting, for the transaction about to run (any thread)."""
        with self._lock:
            rows, self._rows = self._rows, []
        return rows

    def give_back(self, rows: Sequence[W]) -> None:
        """The transaction that carried ``rows`` rolled back (any thread): they wait for
        the next one, first in line."""
        if not rows:
            return
        with self._lock:
            self._rows[:0] = rows
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._arm()
        else:
            loop.call_soon_threadsafe(self._arm)

    def close(self) -> None:
        """No more timers: the database closes (its owner writes the rows first)."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self) -> None:
        if self._rows and self._timer is None and not self._closed and self._loop is not None:
            self._timer = self._loop.call_later(SOON_WAIT, self._commit)

    def _commit(self) -> None:
        self._timer = None
        if self._rows and not self._closed and self._committing is None:
            self._committing = asyncio.ensure_future(self._commit_alone())
            self._committing.add_done_callback(self._committed)

    def _committed(self, done: asyncio.Future[Any]) -> None:
        self._committing = None
        if not done.cancelled() and done.exception() is not None:
            log.error("rows waiting to be written failed: %s", done.exception())
        self._arm()
