"""TurnJobs (``turn_jobs``): a message's job from submission to its finish, the leases of
the jobs a process runs, and what start-up recovery reads back.

Writes that precede a reply are durable before the reply is sent: committed, or appended to
the intake journal and committed shortly after, a hundred turns to a commit (see
``clawbot.store.intake``)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from clawbot.errors import LeaseLostError
from clawbot.messages import TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.runtime.usage import cost_usd_of, tokens_of
from clawbot.scheduling.backlog import BacklogItem
from clawbot.scheduling.jobs import JobStatus, TurnJob
from clawbot.store.backlog import drain_backlog, insert_backlog
from clawbot.store.intake import PendingIntakes
from clawbot.store.journal import Intake
from clawbot.store.ledger import first_delivery, ledger_row, store_intake
from clawbot.store.records import JobSummary, SessionActivity, TurnEnd
from clawbot.store.rows import (
    ANSWER_ID,
    INSERT_JOB,
    INSERT_MESSAGE,
    JobRow,
    answer_of,
    blocks,
    mark_replied,
    marks,
    message_row,
    now,
)
from clawbot.store.sql import Connection, SqlDatabase

_JOB_COLUMNS = (
    "id, session_key, lane, status, attempts, owner, lease_until, merged_into, reply_to,"
    " replied, error, created_at, started_at, finished_at"
)

# Host parameters in one ``IN (...)``: well under SQLite's limit (999 in old builds).
_KEYS_PER_QUERY = 500


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None


def _parse(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _job(
    id: str,
    session_key: str,
    lane: str,
    status: str,
    attempts: int,
    owner: str | None,
    lease_until: str | None,
    merged_into: str | None,
    reply_to: str | None,
    replied: int,
    error: str | None,
    created_at: str | None,
    started_at: str | None,
    finished_at: str | None,
) -> TurnJob:
    """A TurnJob from the columns of ``_JOB_COLUMNS``, in that order."""
    return TurnJob(
        id=id,
        session_key=session_key,
        lane=lane,  # type: ignore[arg-type]  # the database holds only valid lanes
        status=status,  # type: ignore[arg-type]
        attempts=int(attempts),
        owner=owner,
        lease_until=_parse(lease_until),
        merged_into=merged_into,
        reply_to=reply_to,
        replied=bool(replied),
        error=error,
        created_at=_parse(created_at),
        started_at=_parse(started_at),
        finished_at=_parse(finished_at),
    )


def _check_owner(db: Connection, job_id: str, owner: str) -> None:
    """Fencing: a job another process has claimed is no longer ours to write."""
    row = db.execute("SELECT owner FROM turn_jobs WHERE id = ?", (job_id,)).fetchone()
    if row is None:
        return
    (current,) = row
    if current is not None and current != owner:
        raise LeaseLostError(f"job {job_id} is now run by {current}")


class SqlJobs:
    """Jobs and their leases, owned by this process as ``owner``."""

    def __init__(
        self, database: SqlDatabase, intakes: PendingIntakes | None, *, owner: str
    ) -> None:
        self._database = database
        self._intakes = intakes
        self._owner = owner
        # Jobs that may have others merged into them (started carrying jobs, or taken over
        # from another process): only their finish has merged jobs to close as well.
        self._runners: set[str] = set()

    async def submit(
        self,
        session: Session,
        job: TurnJob,
        *,
        entry: TranscriptEntry | None = None,
        item: BacklogItem | None = None,
        dedup_id: str | None = None,
        replied: Sequence[str] = (),
    ) -> bool:
        """Persist an inbound message and its TurnJob: its ``entry`` goes into the transcript
        (an idle session) or its backlog ``item`` into the backlog (a busy one). A
        redelivered platform message id writes nothing and returns False. ``replied`` marks
        jobs whose replies went out since (it rides along for free).

        An entry is made durable by one append to the intake journal when nothing else is
        on its way to SQLite; its rows then go in with the next transaction (the turn's
        answer, usually), so a turn commits once. Otherwise it is one transaction."""
        stamp = now()
        ledger = ledger_row(session, dedup_id, stamp) if dedup_id is not None else None
        job_row = JobRow(
            job.id,
            session.key,
            job.lane,
            job.status,
            job.attempts,
            job.owner,
            _iso(job.lease_until),
            job.reply_to,
            stamp if job.status == "running" else None,
            stamp,
            stamp,
        )
        if entry is not None and item is None:
            intake = Intake(
                ledger, message_row(session.key, session.epoch, entry), job_row, tuple(replied)
            )
            if self._intakes is not None and self._intakes.free():
                accepted = self._intakes.accept(intake)
                if accepted is not None:
                    return accepted
            return await self._store_intake(intake)

        def submit(db: Connection) -> bool:
            if ledger is not None and not first_delivery(db, ledger):
                return False
            db.execute(INSERT_JOB, (*job_row, None, None, None, None, 0))
            if item is not None:
                insert_backlog(db, session.key, item, stamp)
            mark_replied(db, replied)
            return True

        return await self._database.grouped(submit)

    async def start(
        self,
        session: Session,
        job_id: str,
        *,
        lease_until: datetime,
        entries: Sequence[TranscriptEntry] = (),
        carried: Sequence[str] = (),
        replied: Sequence[str] = (),
    ) -> None:
        """Begin a job's turn in one transaction: drain the backlog rows of the jobs it
        carries, write its input ``entries``, merge the ``carried`` jobs into it and take its
        lease."""
        stamp = now()
        lease = _iso(lease_until)
        owner = self._owner
        if carried:
            self._runners.add(job_id)

        def start(db: Connection) -> None:
            drain_backlog(db, [job_id, *carried])
            input_id = None
            for entry in entries:
                row_id = db.execute(
                    INSERT_MESSAGE, message_row(session.key, session.epoch, entry)
                ).lastrowid
                input_id = input_id or row_id
            if carried:
                db.execute(
                    f"UPDATE turn_jobs SET merged_into = ?, updated_at = ?"
                    f" WHERE id IN ({marks(carried)}) OR merged_into IN ({marks(carried)})",
                    (job_id, stamp, *carried, *carried),
                )
            db.execute(
                "UPDATE turn_jobs SET status = 'running', owner = ?, lease_until = ?,"
                " attempts = CASE WHEN attempts > 1 THEN attempts ELSE 1 END,"
                " started_at = ?, updated_at = ?,"
                " input_message_id = coalesce(?, input_message_id) WHERE id = ?",
                (owner, lease, stamp, stamp, input_id, job_id),
            )
            mark_replied(db, replied)

        await self._database.grouped(start)

    async def claim(self, job: TurnJob, lease_until: datetime) -> bool:
        """Take over an orphaned job (its owner crashed or its lease expired), counting an
        attempt. False when another process claimed it first."""
        stamp = now()
        owner = self._owner
        self._runners.add(job.id)  # its first owner may have merged jobs into it

        def claim(db: Connection) -> bool:
            cursor = db.execute(
                "UPDATE turn_jobs SET status = 'running', owner = ?, lease_until = ?,"
                " attempts = attempts + 1, started_at = ?, updated_at = ?"
                " WHERE id = ? AND status = ? AND owner IS ?",
                (owner, _iso(lease_until), stamp, stamp, job.id, job.status, job.owner),
            )
            return cursor.rowcount == 1

        return await self._database.transaction(claim)

    async def requeue(self, session: Session, job_id: str, item: BacklogItem | None = None) -> None:
        """A running turn stopped at a tool boundary or for shutdown: its job waits again,
        without an owner, with its resume token (when given) in the backlog."""
        stamp = now()
        owner = self._owner

        def requeue(db: Connection) -> None:
            _check_owner(db, job_id, owner)
            cursor = db.execute(
                "UPDATE turn_jobs SET status = 'queued', owner = NULL, lease_until = NULL,"
                " updated_at = ? WHERE id = ? AND status = 'running'",
                (stamp, job_id),
            )
            if item is not None and cursor.rowcount == 1:
                insert_backlog(db, session.key, item, stamp)

        await self._database.transaction(requeue)

    async def close(
        self,
        job_ids: Sequence[str],
        status: JobStatus,
        error: str | None = None,
        *,
        notice_of: str | None = None,
    ) -> None:
        """Close jobs (and the jobs merged into them) that end without a normal finish:
        stopped, past the deadline or out of attempts. Their backlog rows go too. Taking
        ownership fences out a stale runner of a job given up on.

        They count as replied (the user was told), but for ``notice_of``: the job whose
        failure notice is still to be sent, which stays unreplied until the notice is marked
        sent, so a crash in between sends it at the next start. The others are answered by
        that notice."""
        if not job_ids:
            return
        stamp = now()
        ids = list(job_ids)
        owner = self._owner

        def close(db: Connection) -> None:
            db.execute(
                f"UPDATE turn_jobs SET status = ?, error = ?, owner = ?, updated_at = ?,"
                f" finished_at = ?, replied = CASE WHEN id IS ? THEN 0 ELSE 1 END"
                f" WHERE id IN ({marks(ids)}) OR merged_into IN ({marks(ids)})",
                (status, error, owner, stamp, stamp, notice_of, *ids, *ids),
            )
            drain_backlog(db, ids)

        await self._database.transaction(close)
        self._runners.difference_update(ids)

    async def renew(self, job_ids: Sequence[str], until: datetime) -> None:
        """Extend the leases of long-running jobs this process still owns (one statement)."""
        if not job_ids:
            return
        ids = list(job_ids)
        owner = self._owner

        def renew(db: Connection) -> None:
            db.execute(
                f"UPDATE turn_jobs SET lease_until = ? WHERE owner = ? AND id IN ({marks(ids)})",
                (_iso(until), owner, *ids),
            )

        await self._database.transaction(renew)

    async def mark_replied(self, job_ids: Sequence[str]) -> None:
        if job_ids:
            await self._database.transaction(lambda db: mark_replied(db, job_ids))

    async def mark_delivery_failed(self, job_id: str, error: str) -> None:
        """A reply that could not be delivered leaves a visible mark on its turn."""
        await self._database.write(
            "UPDATE turn_jobs SET error = ?, updated_at = ? WHERE id = ?",
            (f"delivery failed: {error}", now(), job_id),
        )

    async def finish(
        self,
        session: Session,
        job_id: str,
        entries: Iterable[TranscriptEntry],
        *,
        status: JobStatus = "done",
        error: str | None = None,
    ) -> None:
        """Append the turn's remaining entries and close its job (and the jobs merged into
        it), atomically. Raises LeaseLostError when another process took the job over."""
        rows = [message_row(session.key, session.epoch, e) for e in entries]
        stamp = now()
        intakes = self._intakes
        if (
            intakes is not None
            and intakes.free()
            and intakes.finish(job_id, rows, status, error, stamp)
        ):
            return
        runner = job_id in self._runners
        try:
            await self._store_finish(TurnEnd(job_id, rows, status, error, stamp, runner))
        finally:  # finished, or another process's now (a take-over here adds it again)
            self._runners.discard(job_id)

    async def _store_intake(self, intake: Intake) -> bool:
        """Write an accepted message's rows in one transaction; False for a redelivery.
        (PostgreSQL's store does it in one round trip: ``clawbot.store.postgres.turns``.)"""
        return await self._database.grouped(functools.partial(store_intake, intake=intake))

    async def _store_finish(self, end: TurnEnd) -> None:
        """Write a turn's end in one transaction; LeaseLostError, nothing written, when
        another process took the job over."""
        owner = self._owner
        answer = answer_of(end.rows) if end.status == "done" else None
        closing = (end.status, end.error, end.stamp, end.stamp)

        def finish(db: Connection) -> None:
            # The rows go in first so the job can point at its final answer (found by the
            # database: no id read back); a fenced-off finish below raises, and the
            # transaction takes them back out.
            for row in end.rows:
                db.execute(INSERT_MESSAGE, row)
            found: tuple[str | int | None, ...] = ()
            reply = "reply_message_id"
            if answer is not None:
                reply, found = ANSWER_ID, (answer.session_key, answer.epoch, answer.turn_id)
            closed = db.execute(
                "UPDATE turn_jobs SET status = ?, error = ?, updated_at = ?, finished_at = ?,"
                f" reply_message_id = {reply} WHERE id = ? AND (owner IS NULL OR owner = ?)",
                (*closing, *found, end.job_id, owner),
            )
            if closed.rowcount != 1:
                _check_owner(db, end.job_id, owner)
            if end.runner:
                db.execute(
                    "UPDATE turn_jobs SET status = ?, error = ?, updated_at = ?, finished_at = ?,"
                    " replied = 1 WHERE merged_into = ?",
                    (*closing, end.job_id),
                )

        await self._database.grouped(finish)

    # reads ----------------------------------------------------------------------------

    async def open(self, session_key: str | None = None) -> list[TurnJob]:
        """Every queued or running job (of one session if given), oldest first: the work to
        recover at start-up. (Such a job is never replied yet; saying so lets SQLite use the
        pending index.)"""
        where = "status IN ('queued', 'running') AND replied = 0"
        if session_key is None:
            return await self._jobs(where)
        return await self._jobs(where + " AND session_key = ?", (session_key,))

    async def unreplied(self) -> list[TurnJob]:
        """Finished turns whose reply may not have gone out before a crash."""
        return await self._jobs(
            "status IN ('done', 'failed') AND replied = 0 AND owner IS NOT NULL"
            " AND merged_into IS NULL"
        )

    async def _jobs(self, where: str, params: tuple[str, ...] = ()) -> list[TurnJob]:
        rows = await self._database.fetchall(
            f"SELECT {_JOB_COLUMNS} FROM turn_jobs WHERE {where} ORDER BY created_at, id", params
        )
        return [_job(*row) for row in rows]

    async def reply_text(self, job_id: str) -> str | None:
        """The final answer a finished turn stored, for sending it again."""
        row = await self._database.fetchone(
            "SELECT m.content_json FROM turn_jobs j JOIN messages m ON m.id = j.reply_message_id"
            " WHERE j.id = ?",
            (job_id,),
            small=True,
        )
        if row is None:  # finished before migration 6 recorded the pointer
            row = await self._database.fetchone(
                "SELECT content_json FROM messages WHERE turn_id = ? AND role = 'assistant'"
                " ORDER BY id DESC LIMIT 1",
                (job_id,),
            )
        if row is None:
            return None
        (content_json,) = row
        entry = TranscriptEntry(role="assistant", content=blocks.validate_json(content_json))
        return entry.text

    async def get(self, job_id: str) -> JobSummary | None:
        rows = await self._summaries("id = ?", job_id)
        return rows[0] if rows else None

    async def for_session(self, session_key: str) -> list[JobSummary]:
        """A session's jobs, oldest first."""
        return await self._summaries("session_key = ?", session_key)

    async def activity(self, session_keys: Sequence[str]) -> list[SessionActivity]:
        """The turns of each of these sessions at a glance, in the order given; a session
        that never had a turn is left out. Two queries for them all: the jobs, and the
        usage the assistant messages recorded (summed here rather than kept as a running
        total, which a crash between a turn's end and the total's update would skew)."""
        keys = list(dict.fromkeys(session_keys))
        if not keys:
            return []
        rows = []
        metas: dict[str, list[dict[str, Any]]] = {}
        for start in range(0, len(keys), _KEYS_PER_QUERY):
            chunk = keys[start : start + _KEYS_PER_QUERY]
            marks = ", ".join("?" * len(chunk))
            rows += await self._database.fetchall(
                "SELECT id, session_key, lane, status, attempts, error, created_at"
                f" FROM turn_jobs WHERE session_key IN ({marks}) ORDER BY created_at",
                chunk,
            )
            for key, meta_json in await self._database.fetchall(
                f"SELECT session_key, meta_json FROM messages WHERE session_key IN ({marks})"
                " AND role = 'assistant' AND meta_json <> '{}'",
                chunk,
            ):
                try:
                    meta = json.loads(meta_json)
                except ValueError:
                    continue  # a damaged row: its usage is unknown
                if isinstance(meta, dict):
                    metas.setdefault(key, []).append(meta)
        found: dict[str, SessionActivity] = {}
        for id, key, lane, status, attempts, error, created_at in rows:
            latest = JobSummary(id, key, lane, status, int(attempts), error)
            at = datetime.fromisoformat(created_at)
            before = found.get(key)
            found[key] = SessionActivity(
                session_key=key,
                latest=latest,
                first_at=before.first_at if before else at,
                latest_at=at,
                turns=before.turns + 1 if before else 1,
            )
        return [
            replace(
                found[key],
                tokens=tokens_of(metas.get(key, ())),
                cost_usd=cost_usd_of(metas.get(key, ())),
            )
            for key in keys
            if key in found
        ]

    async def _summaries(self, where: str, value: str) -> list[JobSummary]:
        rows = await self._database.fetchall(
            "SELECT id, session_key, lane, status, attempts, error FROM turn_jobs"
            f" WHERE {where} ORDER BY created_at",
            (value,),
        )
        return [
            JobSummary(id, key, lane, status, int(attempts), error)
            for id, key, lane, status, attempts, error in rows
        ]
