"""The inbound dedup ledger (``inbound_seen``): the platform message ids already taken, so a
redelivered message is stored once. Also how an accepted message's rows (an intake) are
written, since the ledger decides whether they are written at all."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime, timedelta

from clawbot.channels.interface import ChatCursor
from clawbot.routing.sessions import Session
from clawbot.store.journal import Intake
from clawbot.store.rows import (
    INSERT_JOB,
    INSERT_MESSAGE,
    INSERT_SEEN,
    LedgerKey,
    LedgerRow,
    insert_messages,
    mark_replied,
)
from clawbot.store.sql import Connection, SqlDatabase

SELECT_SEEN = "SELECT 1 FROM inbound_seen WHERE channel = ? AND chat_id = ? AND message_id = ?"
"""Whether the ledger holds a key: a platform message already taken."""
_AFTER_KEY = "(channel, chat_id, message_id) > (?, ?, ?)"
_UPTO_KEY = "(channel, chat_id, message_id) <= (?, ?, ?)"


def ledger_row(session: Session, message_id: str, now: str) -> LedgerRow:
    return LedgerRow(session.channel, session.chat_id, message_id, session.key, now)


def first_delivery(db: Connection, row: LedgerRow) -> bool:
    """Record a platform message id in the dedup ledger; False when it was seen before."""
    return db.execute(INSERT_SEEN, row).rowcount == 1


def store_intake(
    db: Connection,
    intake: Intake,
    *,
    dedup: bool = True,
    answered: AbstractSet[str] = frozenset(),
) -> bool:
    """Write an accepted message's rows; False (and nothing written) for a redelivery. An
    intake accepted from the journal is written whatever the ledger says (``dedup`` off):
    it was checked when accepted, and its turn runs already. ``answered``: the jobs written
    in this same transaction whose replies went out, so their rows go in marked replied
    and their marks take no statement of their own."""
    seen = db.execute(INSERT_SEEN, intake.ledger) if intake.ledger is not None else None
    message = db.execute(INSERT_MESSAGE, intake.message)
    # Both results are read together (on PostgreSQL, one round trip for both statements);
    # a redelivery takes its message back out, so nothing is written.
    if dedup and seen is not None and seen.rowcount != 1:
        db.execute("DELETE FROM messages WHERE id = ?", (message.lastrowid,))
        return False
    message_id = message.lastrowid
    finish = intake.finish
    job = intake.job
    replied = 1 if job.id in answered else 0
    if finish is None:
        db.execute(INSERT_JOB, (*job, message_id, None, None, None, replied))
    else:  # the job goes in as it ended, pointing at its answer
        answer = insert_messages(db, finish.rows)
        status, at = finish.status, finish.at
        reply = answer if status == "done" else None
        db.execute(
            INSERT_JOB,
            (
                job.id,
                job.session_key,
                job.lane,
                status,
                job.attempts,
                job.owner,
                job.lease_until,
                job.reply_to,
                job.started_at,
                job.created_at,
                at,  # updated_at
                message_id,
                finish.error,
                at,  # finished_at
                reply,
                replied,
            ),
        )
    marks = intake.replied
    if answered:
        marks = tuple(job_id for job_id in marks if job_id not in answered)
    mark_replied(db, marks)
    return True


def replay(db: Connection, intakes: Sequence[Intake], replied: Sequence[str] = ()) -> list[Intake]:
    """Write the journalled intakes the database lacks (a job row says it has one) and the
    reply marks the journal noted; the intakes written."""
    added = []
    for intake in intakes:
        if db.execute("SELECT 1 FROM turn_jobs WHERE id = ?", (intake.job_id,)).fetchone():
            continue
        store_intake(db, intake, dedup=False)
        added.append(intake)
    mark_replied(db, replied)
    return added


def _where(conditions: Sequence[str]) -> str:
    return f" WHERE {' AND '.join(conditions)}" if conditions else ""


class SqlLedger:
    """The dedup ledger's upkeep, and what it tells about recent chats."""

    def __init__(self, database: SqlDatabase) -> None:
        self._database = database

    async def forget_older_than(self, older_than: timedelta, *, chunk: int = 5000) -> int:
        """Forget the platform message ids taken more than ``older_than`` ago, so the dedup
        ledger stays bounded; how many were forgotten. Platforms redeliver within hours or
        not at all, so a retention of days loses no protection.

        It walks the ledger in key order, ``chunk`` keys per transaction, each picking up
        where the last one ended: the whole pass reads the ledger once, no transaction holds
        the write lock long or swells the WAL, and it all runs on aiosqlite's thread, never
        stalling the event loop."""
        cutoff = (datetime.now(UTC) - older_than).isoformat()

        def forget(db: Connection, after: LedgerKey | None) -> tuple[int, LedgerKey | None]:
            """Forget the old ids among the next ``chunk`` keys after ``after``; how many,
            and the last key of that window (None: the walk reached the end)."""
            window, params = ([_AFTER_KEY], list(after)) if after is not None else ([], [])
            end = db.execute(
                "SELECT channel, chat_id, message_id FROM inbound_seen"
                f"{_where(window)} ORDER BY channel, chat_id, message_id LIMIT 1 OFFSET ?",
                (*params, chunk - 1),
            ).fetchone()
            if end is not None:
                window, params = [*window, _UPTO_KEY], [*params, *end]
            removed = db.execute(
                f"DELETE FROM inbound_seen{_where(['received_at < ?', *window])}",
                (cutoff, *params),
            ).rowcount
            return removed, end

        forgotten, after = 0, None
        while True:
            removed, after = await self._database.transaction(
                functools.partial(forget, after=after), background=True
            )
            forgotten += removed
            if after is None:
                return forgotten

    async def recent_chats(self, channel: str, since: datetime) -> list[ChatCursor]:
        """The chats (and threads) of ``channel`` with a session that took a platform message
        at or after ``since``, each with the last message id it took and when: where an
        adapter whose platform never redelivers resumes reading (``Adapter.catch_up``)."""
        rows = await self._database.fetchall(
            "SELECT s.chat_id, s.thread_id, seen.message_id, latest.last_at"
            " FROM (SELECT session_key, chat_id, MAX(received_at) AS last_at"
            "       FROM inbound_seen WHERE channel = ? AND received_at >= ?"
            "       GROUP BY session_key, chat_id) AS latest"
            " JOIN sessions AS s ON s.key = latest.session_key"
            " JOIN inbound_seen AS seen ON seen.channel = ? AND seen.chat_id = latest.chat_id"
            "  AND seen.session_key = latest.session_key AND seen.received_at = latest.last_at"
            " ORDER BY latest.last_at",
            (channel, since.astimezone(UTC).isoformat(), channel),
        )
        cursors: dict[tuple[str, str | None], ChatCursor] = {}
        for chat_id, thread_id, message_id, last_at in rows:  # one per chat: ties are rare
            cursors[(chat_id, thread_id)] = ChatCursor(
                chat_id=chat_id,
                thread_id=thread_id,
                last_message_id=message_id,
                last_seen=datetime.fromisoformat(last_at),
            )
        return list(cursors.values())
