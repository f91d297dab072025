"""The rows an accepted message writes (its dedup ledger row, transcript row and job row),
as named tuples: still plain tuples for ``sqlite3.execute`` and the intake journal's JSON,
but read by name. Their INSERT statements live with them, since the table modules, the
journal replay and the intake path all write them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import NamedTuple

from pydantic import TypeAdapter

from clawbot.messages import ContentBlock, Provenance, TranscriptEntry
from clawbot.redaction import redactor
from clawbot.store.sql import Connection

blocks = TypeAdapter(tuple[ContentBlock, ...])
"""Reads and writes a transcript row's ``content_json``."""
_dump_blocks = blocks.serializer.to_json
"""``blocks.dump_json`` without its Python wrapper, which cost 2-3 times the serializing
itself (about 5 µs a row): every transcript row passes it."""

_PROVENANCE = Provenance.__pydantic_serializer__
"""``model_dump_json``'s serializer, called without the wrapper (about 1 µs a row)."""

LedgerKey = tuple[str, str, str]
"""(channel, chat id, platform message id): the dedup ledger's primary key."""


def now() -> str:
    """The current time as the store writes it."""
    return datetime.now(UTC).isoformat()


class LedgerRow(NamedTuple):
    """One platform message id taken, in the dedup ledger (``inbound_seen``)."""

    channel: str
    chat_id: str
    message_id: str
    session_key: str
    received_at: str


INSERT_SEEN = (
    "INSERT OR IGNORE INTO inbound_seen (channel, chat_id, message_id, session_key,"
    " received_at) VALUES (?, ?, ?, ?, ?)"
)


class MessageRow(NamedTuple):
    """One transcript entry as stored in ``messages`` (without its row id)."""

    session_key: str
    epoch: int
    role: str
    content_json: str
    provenance_json: str
    meta_json: str
    turn_id: str | None
    created_at: str


INSERT_MESSAGE = (
    "INSERT INTO messages (session_key, epoch, role, content_json, provenance_json, meta_json,"
    " turn_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def message_row(key: str, epoch: int, entry: TranscriptEntry) -> MessageRow:
    """The row of a transcript entry. Every transcript write passes here, so this is where
    secrets are masked: a key a user pasted or a tool printed is never stored."""
    return MessageRow(
        key,
        epoch,
        entry.role,
        redactor.redact(_dump_blocks(entry.content).decode()),
        _PROVENANCE.to_json(entry.provenance, exclude_defaults=True).decode(),
        redactor.redact(json.dumps(entry.meta)) if entry.meta else "{}",
        entry.turn_id,
        entry.created_at.isoformat(),
    )


def insert_messages(db: Connection, rows: Sequence[MessageRow]) -> int | None:
    """Insert a turn's transcript rows in order; the row id of its answer (the last
    assistant row), if any."""
    answer = None
    for row in rows:
        cursor = db.execute(INSERT_MESSAGE, row)
        if row.role == "assistant":
            answer = cursor
    # only the answer's id is read: on PostgreSQL the rows go to the server together
    return answer.lastrowid if answer is not None else None


def answer_of(rows: Sequence[MessageRow]) -> MessageRow | None:
    """The row of a turn's answer among its rows (the last assistant row), if any."""
    return next((row for row in reversed(rows) if row.role == "assistant"), None)


ANSWER_ID = (
    "(SELECT max(id) FROM messages WHERE session_key = ? AND epoch = ? AND turn_id IS ?"
    " AND role = 'assistant')"
)
"""The id of the answer just inserted, found by the database (the newest assistant row of its
turn), so a statement can point at it without the id being read back first."""


class JobRow(NamedTuple):
    """A new TurnJob as an intake carries it: the ``turn_jobs`` columns known when the
    message is accepted (the input message's row id is known only once it is stored)."""

    id: str
    session_key: str
    lane: str
    status: str
    attempts: int
    owner: str | None
    lease_until: str | None
    reply_to: str | None
    started_at: str | None
    created_at: str
    updated_at: str


INSERT_JOB = (
    "INSERT INTO turn_jobs (id, session_key, lane, status, attempts, owner, lease_until,"
    " reply_to, started_at, created_at, updated_at, input_message_id, error, finished_at,"
    " reply_message_id, replied) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
"""A job row: its ``JobRow``, then the input message's row id, error, finish time, answer's
row id and whether its reply went out (1 for a turn answered before its rows were written)."""


def marks(values: Sequence[object]) -> str:
    """The ``?, ?, ...`` placeholders for an ``IN (...)`` list of ``values``."""
    return ", ".join("?" * len(values))


def mark_replied(db: Connection, job_ids: Sequence[str]) -> None:
    """Mark jobs whose replies went out (these marks ride along with an intake's rows)."""
    if job_ids:
        ids = list(job_ids)
        db.execute(f"UPDATE turn_jobs SET replied = 1 WHERE id IN ({marks(ids)})", ids)
