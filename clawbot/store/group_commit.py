"""Group commit: the writes issued in one event-loop pass share one commit, each in a
savepoint of its own, so under a burst a message costs a savepoint, not a commit. The half
of :class:`~clawbot.store.database.Database` behind its :meth:`grouped`; the transactions
it runs on are the database's.

A write nobody waits for (a usage row, :meth:`GroupCommit.soon`) goes further: it rides on
the next transaction whatever it is (``riding_rows``)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from clawbot.store.riding_rows import RidingRows
from clawbot.store.sqlite_errors import describe, is_busy

T = TypeVar("T")
log = logging.getLogger(__name__)
Work = Callable[[sqlite3.Connection], Any]


class GroupCommit(ABC):
    """Group commit over a database's connection and transactions (declared here, defined
    by ``Database``), with the batch of the current pass as its own state."""

    path: Path
    _conn: aiosqlite.Connection
    _loop: asyncio.AbstractEventLoop
    _queued: int  # operations queued on, or running in, aiosqlite's thread
    _closed: bool

    def __init__(self) -> None:
        self._group: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]] = []
        self._group_drain: asyncio.Task[None] | None = None
        self._group_scheduled = False  # a drain is due or running
        self._pass_wrote = False  # this loop pass committed a write at once
        self._soon: RidingRows[Work] = RidingRows(lambda: self.grouped(_nothing))

    @abstractmethod
    def _transact(self, db: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` in one ``BEGIN IMMEDIATE`` transaction on ``db``, right here."""

    @abstractmethod
    async def _commit(
        self, work: Callable[[sqlite3.Connection], T], *, background: bool = False
    ) -> T:
        """``work`` in one transaction, here or on aiosqlite's thread, retried while locked."""

    @abstractmethod
    def _committed(self) -> None:
        """A transaction committed (a checkpoint may be due)."""

    async def grouped(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Like :meth:`transaction`, with group commit: the first write of an event-loop pass
        commits at once, right here (no task, no thread, no wait for the loop), and the
        writes issued after it in the same pass share one commit in the next pass, so under
        a burst the per-message cost is a savepoint, not a commit. Each caller returns once
        its own work is committed; a failing work is rolled back alone. A shared batch is
        committed by a callback, not by any caller, so a caller that is cancelled never
        strands another caller's work."""
        if not (self._group_scheduled or self._pass_wrote or self._queued or self._closed):
            self._pass_wrote = True
            self._loop.call_soon(self._end_pass)
            try:
                result = self._transact(self._conn._conn, work)
            except sqlite3.OperationalError as exc:
                if not is_busy(exc):
                    raise describe(exc, self.path) from None
            except sqlite3.DatabaseError as exc:
                raise describe(exc, self.path) from None
            else:
                self._committed()
                return result
        future: asyncio.Future[T] = self._loop.create_future()
        self._group.append((work, future))
        if not self._group_scheduled:
            self._group_scheduled = True
            self._loop.call_soon(self._drain_now)
        return await future

    def soon(self, work: Work) -> None:
        """Write ``work`` with the next transaction, whichever it is, or on its own after
        ``SOON_WAIT``: for a row no caller waits for (a usage row), which then costs an
        insert in a commit already paid for. A failure is logged; the row is lost."""
        self._soon.add(work)

    def _write_soon(self, db: sqlite3.Connection, works: Sequence[Work]) -> None:
        """Inside a transaction: the writes nobody waits for, in a savepoint of their own,
        so a failing one is dropped (and logged), never failing the work it rides with."""
        db.execute("SAVEPOINT clawbot_soon")
        try:
            for work in works:
                work(db)
        except sqlite3.Error as exc:
            db.execute("ROLLBACK TO clawbot_soon")
            log.error("%d rows no caller waited for could not be written: %s", len(works), exc)
        db.execute("RELEASE clawbot_soon")

    def _end_pass(self) -> None:
        self._pass_wrote = False

    def _drain_now(self) -> None:
        """Commit the pass's batch right here when the connection is free (the common case:
        no task, no thread). When aiosqlite's thread is busy, or the database is locked by
        another process, a task takes over and waits its turn."""
        if self._queued or self._closed:
            self._group_drain = asyncio.ensure_future(self._drain_group())
            return
        batch, self._group = self._group, []
        try:
            results = self._transact(self._conn._conn, _group_work(batch))
        except sqlite3.OperationalError as exc:
            if is_busy(exc):
                self._group[:0] = batch
                self._group_drain = asyncio.ensure_future(self._drain_group())
                return
            results = [(False, exc)] * len(batch)
        except Exception as exc:
            results = [(False, exc)] * len(batch)
        else:
            self._committed()
        self._group_scheduled = False
        self._settle(batch, results)

    async def _drain_group(self) -> None:
        try:
            while self._group:
                batch, self._group = self._group, []
                try:
                    results = await self._commit(_group_work(batch))
                except BaseException as exc:
                    results = [(False, exc)] * len(batch)
                self._settle(batch, results)
        finally:
            self._group_drain = None
            self._group_scheduled = False

    def _settle(
        self,
        batch: Sequence[tuple[Any, asyncio.Future[Any]]],
        results: Sequence[tuple[bool, Any]],
    ) -> None:
        for (_, future), (ok, value) in zip(batch, results, strict=True):
            if future.done():
                continue
            if ok:
                future.set_result(value)
            elif isinstance(value, sqlite3.DatabaseError):
                future.set_exception(describe(value, self.path))
            else:
                future.set_exception(value)


def _nothing(db: sqlite3.Connection) -> None:
    """A transaction's work when only the writes nobody waits for are to be written."""
    return None


def _group_work(
    batch: Sequence[tuple[Callable[[sqlite3.Connection], Any], Any]],
) -> Callable[[sqlite3.Connection], list[tuple[bool, Any]]]:
    """One transaction's work for a batch: (ok, value or exception) per write. Each write of
    a batch of several runs in a savepoint, so a failing one is rolled back alone; a single
    write needs none (the transaction is its savepoint)."""
    works = [work for work, _ in batch]

    def run(db: sqlite3.Connection) -> list[tuple[bool, Any]]:
        if len(works) == 1:
            return [(True, works[0](db))]
        results: list[tuple[bool, Any]] = []
        for work in works:
            db.execute("SAVEPOINT clawbot_work")
            try:
                value = work(db)
            except Exception as exc:
                db.execute("ROLLBACK TO clawbot_work")
                db.execute("RELEASE clawbot_work")
                results.append((False, exc))
            else:
                db.execute("RELEASE clawbot_work")
                results.append((True, value))
        return results

    return run
