"""A message's intake and its turn's end on PostgreSQL, each in one round trip.

The shared repository (``clawbot.store.jobs``) writes both as units of work that read a row
count midway: whether the dedup ledger row was new (else the message is a redelivery and
nothing is written), and whether the job's update matched (else another process took the
turn over, the fence, and nothing is written). On PostgreSQL each such read is a round trip
of its own before the commit can be sent. Here the decision is made by the server inside one
statement (data-modifying ``WITH`` queries: the rows are inserted only when the ledger row
was new, or only when the fence held), so the statement and its ``COMMIT`` go in one send
and the answer is read back with it. The promises are those of the shared code:

- the dedup ledger is the one table every process shares: ``ON CONFLICT DO NOTHING`` waits
  for another process's insert of the same key and then inserts nothing, so a redelivery to
  another process writes nothing and is answered once;
- the fence locks the job's row first (``FOR UPDATE``), so the decision holds until the
  commit: a job another process owns gets nothing written, and the caller its
  LeaseLostError, as before."""

from __future__ import annotations

from typing import Any

from clawbot.errors import LeaseLostError
from clawbot.store.jobs import SqlJobs
from clawbot.store.journal import Intake
from clawbot.store.postgres.database import PostgresDatabase
from clawbot.store.records import TurnEnd
from clawbot.store.rows import answer_of, marks

_MESSAGE_COLUMNS = (
    "session_key, epoch, role, content_json, provenance_json, meta_json, turn_id, created_at"
)
_MESSAGE_VALUES = "?::text, ?::integer, ?::text, ?::text, ?::text, ?::text, ?::text, ?::text"
"""One transcript row's values, each with its type: in a ``SELECT`` or ``VALUES`` list the
server cannot tell a value's type from the column it goes to."""

_SEEN = (
    "seen AS (INSERT INTO inbound_seen (channel, chat_id, message_id, session_key,"
    " received_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING 1), "
)
_MESSAGE = (
    f"message AS (INSERT INTO messages ({_MESSAGE_COLUMNS}) SELECT {_MESSAGE_VALUES}"
    " {new} RETURNING id), "
)
_JOB = (
    "job AS (INSERT INTO turn_jobs (id, session_key, lane, status, attempts, owner,"
    " lease_until, reply_to, started_at, created_at, updated_at, input_message_id, replied)"
    " SELECT ?::text, ?::text, ?::text, ?::text, ?::integer, ?::text, ?::text, ?::text,"
    " ?::text, ?::text, ?::text, message.id, 0 FROM message RETURNING 1)"
)
_MARKS = (
    ", marks AS (UPDATE turn_jobs SET replied = 1 WHERE id IN ({ids}) AND EXISTS (SELECT FROM job))"
)


def intake_statement(intake: Intake) -> tuple[str, tuple[Any, ...]]:
    """One statement that writes an accepted message's rows (ledger row, transcript row,
    job, reply marks) when its ledger row is new, and says how many jobs it wrote (0: a
    redelivery, nothing written)."""
    sql = "WITH "
    params: list[Any] = []
    new = ""
    if intake.ledger is not None:
        sql += _SEEN
        params += intake.ledger
        new = "WHERE EXISTS (SELECT FROM seen)"
    sql += _MESSAGE.format(new=new) + _JOB
    params += [*intake.message, *intake.job]
    if intake.replied:
        sql += _MARKS.format(ids=marks(intake.replied))
        params += intake.replied
    return sql + " SELECT count(*) FROM job", tuple(params)


def finish_statement(end: TurnEnd, owner: str) -> tuple[str, tuple[Any, ...]]:
    """One statement that ends a turn when the fence holds (the job's row, locked, is
    missing, unowned or ``owner``'s): its rows, its job's close pointing at its answer
    and, for a runner, the jobs merged into it. It answers whether the fence held and who
    owns the job."""
    sql = (
        "WITH fenced AS (SELECT owner FROM turn_jobs WHERE id = ? FOR UPDATE),"
        " fence AS (SELECT NOT EXISTS (SELECT FROM fenced WHERE owner <> ?) AS held,"
        " (SELECT owner FROM fenced) AS owner)"
    )
    params: list[Any] = [end.job_id, owner]
    reply = "reply_message_id"
    closing = [end.status, end.error, end.stamp, end.stamp, end.job_id]
    if end.rows:
        values = ", ".join(f"({_MESSAGE_VALUES})" for _ in end.rows)
        sql += (
            f", written AS (INSERT INTO messages ({_MESSAGE_COLUMNS}) SELECT * FROM"
            f" (VALUES {values}) AS v WHERE (SELECT held FROM fence) RETURNING id, role)"
        )
        params += [value for row in end.rows for value in row]
        if end.status == "done" and answer_of(end.rows) is not None:
            reply = "(SELECT max(id) FROM written WHERE role = 'assistant')"
    sql += (
        ", closed AS (UPDATE turn_jobs SET status = ?, error = ?, updated_at = ?,"
        f" finished_at = ?, reply_message_id = {reply}"
        " WHERE id = ? AND (SELECT held FROM fence))"
    )
    params += closing
    if end.runner:
        sql += (
            ", merged AS (UPDATE turn_jobs SET status = ?, error = ?, updated_at = ?,"
            " finished_at = ?, replied = 1 WHERE merged_into = ? AND (SELECT held FROM fence))"
        )
        params += closing
    return sql + " SELECT held, owner FROM fence", tuple(params)


class PostgresJobs(SqlJobs):
    """The shared jobs repository, but for a message's intake and its turn's end: one round
    trip each, ``COMMIT`` included."""

    def __init__(self, database: PostgresDatabase, *, owner: str) -> None:
        super().__init__(database, None, owner=owner)
        self._postgres = database

    async def _store_intake(self, intake: Intake) -> bool:
        sql, params = intake_statement(intake)
        ((jobs,),) = await self._postgres.commit_statement(sql, params)
        return bool(jobs)

    async def _store_finish(self, end: TurnEnd) -> None:
        sql, params = finish_statement(end, self._owner)
        ((held, current),) = await self._postgres.commit_statement(sql, params)
        if not held:
            raise LeaseLostError(f"job {end.job_id} is now run by {current}")
