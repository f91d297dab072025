"""Accepted messages made durable in the intake journal (``clawbot.store.journal``) and not
yet written to SQLite: the store side of the journal.

A message for an idle session is accepted by one append to the journal when nothing else is
on its way to SQLite; its turn's end is one more append while the message is still only
there. The database writes them first in its next transaction, whatever that is, through
the :class:`~clawbot.store.database.PendingRows` hook this class fills; a turn that ends
here is written with others, a hundred to a commit or shortly after.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sqlite3

from clawbot.errors import StoreError
from clawbot.scheduling.jobs import JobStatus
from clawbot.store.database import Database, no_work
from clawbot.store.journal import Finish, Intake, IntakeJournal, orphans, replied_line
from clawbot.store.journal import supported as journal_supported
from clawbot.store.ledger import SELECT_SEEN, replay, store_intake
from clawbot.store.rows import LedgerKey, MessageRow

log = logging.getLogger(__name__)
WRITE_BEHIND_TURNS = 100
WRITE_BEHIND_SECONDS = 0.2
"""A turn that ends while its message is still only in the intake journal is journalled
too; journalled messages and turns reach SQLite together, when a turn ends with this many
waiting, or this long after the first turn ended (sooner with any other write, before any
read)."""


class PendingIntakes:
    """This process's journal and the intakes in it that SQLite still lacks. Set
    ``journaling`` off and every message takes a transaction of its own (as on Windows,
    or for a benchmark)."""

    def __init__(self, database: Database, *, synchronous: str) -> None:
        self._database = database
        self._loop = asyncio.get_running_loop()
        self.journaling = str(database.path) != ":memory:" and journal_supported()
        self._sync = synchronous.upper() in ("FULL", "EXTRA")
        self._journal: IntakeJournal | None = None
        self._failed = False  # an append failed: no more journalling in this process
        self.waiting: list[Intake] = []
        self._seen: set[LedgerKey] = set()
        self._write_behind: asyncio.TimerHandle | None = None
        self._writing: asyncio.Task[None] | None = None
        database.pending = self

    # the database's hook --------------------------------------------------------------

    def write(self, db: sqlite3.Connection, count: int) -> None:
        batch = self.waiting[:count]
        # A reply mark rides with a later intake; when the job it marks is in this batch
        # too, its row goes in marked instead of being updated after (a statement a turn).
        ids = {intake.job_id for intake in batch}
        answered = {job_id for intake in batch for job_id in intake.replied if job_id in ids}
        for intake in batch:
            store_intake(db, intake, dedup=False, answered=answered)

    def stored(self, count: int) -> None:
        del self.waiting[:count]
        if not self.waiting:
            self._seen.clear()
            if self._journal is not None:
                try:
                    self._journal.stored()
                except OSError as exc:
                    log.warning("could not reset the intake journal (retried later): %s", exc)

    # accepting ------------------------------------------------------------------------

    def free(self) -> bool:
        """An intake may go to the journal: nothing else is on its way to SQLite, so the
        next transaction, whichever it is, writes it first, in order; and the last one did
        not fail on the database itself, so a store that cannot be written refuses a
        message up front rather than after its model call."""
        return self.journaling and not self._failed and self._database.idle()

    def accept(self, intake: Intake) -> bool | None:
        """Make an intake durable in the journal, not yet in SQLite; False (and nothing
        kept) for a redelivered platform message, None when the journal cannot be written."""
        key = intake.seen_key
        if key is not None:
            if key in self._seen:
                return False
            if self._database.lookup_here(SELECT_SEEN, key) is not None:
                return False
        try:
            self._append(intake.line())
        except OSError as exc:
            # Nothing is lost: the message takes a transaction instead, as every later one
            # of this process does, and the rows already journalled go in with it.
            log.warning(
                "cannot write the intake journal next to %s (%s); storing each message in a"
                " transaction of its own from now on",
                self._database.path,
                exc,
            )
            self._failed = True
            return None
        self.waiting.append(intake)
        if key is not None:
            self._seen.add(key)
        return True

    def finish(
        self,
        job_id: str,
        rows: list[MessageRow],
        status: JobStatus,
        error: str | None,
        now: str,
    ) -> bool:
        """End a turn whose message is still only in the journal by one more append; False
        when its message reached SQLite already. Nobody else can have taken such a job
        over (no other process can see it), so there is nothing to fence."""
        index = len(self.waiting) - 1
        while index >= 0 and self.waiting[index].job_id != job_id:
            index -= 1
        if index < 0 or self._journal is None:
            return False
        finish = Finish(tuple(rows), status, error, now)
        try:
            self._journal.append(finish.line(job_id))
        except OSError as exc:
            log.warning("cannot write the intake journal (%s); using transactions from now on", exc)
            self._failed = True
            return False  # stored by a transaction instead, which reports what is wrong
        self.waiting[index] = self.waiting[index].finished(finish)
        if len(self.waiting) >= WRITE_BEHIND_TURNS:
            try:
                self._database.commit_here(no_work)
            except sqlite3.Error:  # locked by another process, say: retried with a backoff
                self._write_soon()
        elif self._write_behind is None:
            self._write_behind = self._loop.call_later(WRITE_BEHIND_SECONDS, self._write_soon)
        return True

    def note_replied(self, job_id: str) -> None:
        """Note in the intake journal, at once, that a job's reply went out. Its mark in
        SQLite rides along with a later transaction; a crash before that would otherwise
        make the next start send the reply again. One append, no commit. (A journal that
        starts over drops notes whose marks are still on their way: those replies may be
        sent twice after a crash, as without the note.)"""
        if not self.journaling or self._failed:
            return
        try:
            self._append(replied_line(job_id))
        except OSError as exc:
            log.warning("cannot write the intake journal (%s); using transactions from now on", exc)
            self._failed = True

    def _append(self, data: bytes) -> None:
        """Append one record to this process's journal, creating it on first use."""
        if self._journal is None:
            self._journal = IntakeJournal.create(self._database.path, sync=self._sync)
        self._journal.append(data)

    # writing behind -------------------------------------------------------------------

    def _write_soon(self) -> None:
        """Write the journalled turns to SQLite in a task of their own."""
        if self._write_behind is not None:
            self._write_behind.cancel()
            self._write_behind = None
        if self.waiting and self._writing is None and not self._database.closed:
            self._writing = asyncio.ensure_future(self._database.flush())
            self._writing.add_done_callback(self._written)

    def _written(self, task: asyncio.Task[None]) -> None:
        self._writing = None
        if not task.cancelled() and task.exception() is not None:
            log.error("could not store journalled turns (retried later): %s", task.exception())
            if self._write_behind is None and not self._database.closed:
                self._write_behind = self._loop.call_later(1.0, self._write_soon)

    async def close(self) -> None:
        """Write the journalled intakes and delete the journal; when that fails, the journal
        stays for the next start to replay."""
        if self._write_behind is not None:
            self._write_behind.cancel()
            self._write_behind = None
        if self._writing is not None:
            with contextlib.suppress(Exception):
                await self._writing
        try:
            await self._database.flush()
        except StoreError as exc:
            where = self._journal.path.name if self._journal else "the intake journal"
            log.warning("kept accepted messages in %s for the next start: %s", where, exc)
        if self._journal is not None:
            if self.waiting:
                self._journal.release()
            else:
                self._journal.delete()
            self._journal = None

    def abandon(self) -> None:
        """Let go of the journal as a process that dies does (the kernel closes the file,
        which drops its lock), writing and deleting nothing: the next start replays it.
        For tests that kill a store in-process; a real crash needs nothing of this."""
        if self._write_behind is not None:
            self._write_behind.cancel()
            self._write_behind = None
        if self._journal is not None:
            self._journal.release()
            self._journal = None

    # recovery -------------------------------------------------------------------------

    async def recover(self) -> int:
        """Write the rows of the messages that processes which died had accepted into their
        intake journals but not yet into SQLite, and delete those journals; how many
        messages were missing."""
        if not self.journaling:
            return 0
        recovered = 0
        for orphan in orphans(self._database.path):
            try:
                added = await self._database.transaction(
                    functools.partial(replay, intakes=orphan.intakes, replied=orphan.replied),
                    background=True,
                )
            except BaseException:
                orphan.release()
                raise
            orphan.delete()
            if added:
                log.warning(
                    "recovered %d accepted message(s), %d answered, from %s, left by a process"
                    " that stopped before storing them",
                    len(added),
                    sum(1 for intake in added if intake.finish is not None),
                    orphan.path.name,
                )
            recovered += len(added)
        return recovered
