"""The usage ledger (``usage``): a row per call to a paid model, written with the next
commit of the store (``GroupCommit.soon``: an insert in a commit already paid for, or its
own within a second), and its totals added up by SQLite (a read of the ledger writes the
waiting rows first).
Rows are read by column name (:class:`_Row`), never by position alone."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any, NamedTuple, cast

from clawbot.runtime.usage import (
    OK,
    Purpose,
    UsageFilter,
    UsageGroup,
    UsageGrouping,
    UsageRecord,
    UsageTotals,
)
from clawbot.store.database import Database


class _Row(NamedTuple):
    """A ledger row, its fields named as the table's columns."""

    id: int
    at: str
    day: str
    session_key: str | None
    agent_id: str | None
    chain: str | None
    root_key: str | None
    turn_id: str | None
    purpose: str
    model: str
    provider: str
    input_tokens: int | None
    cached_tokens: int | None
    output_tokens: int | None
    cost_nanousd: int | None
    latency_ms: float
    outcome: str


_COLUMNS = ", ".join(_Row._fields)
_INSERT = (
    f"INSERT INTO usage ({', '.join(_Row._fields[1:])})"
    f" VALUES ({', '.join('?' for _ in _Row._fields[1:])})"
)
_SUMS = (
    "count(*), coalesce(sum(input_tokens), 0), coalesce(sum(cached_tokens), 0),"
    " coalesce(sum(output_tokens), 0), coalesce(sum(cost_nanousd), 0),"
    f" coalesce(sum(outcome = '{OK}' AND cost_nanousd IS NULL), 0),"
    f" coalesce(sum(outcome != '{OK}'), 0)"
)
_GROUP_COLUMN: dict[UsageGrouping, str] = {
    "agent": "agent_id",
    "model": "model",
    "session": "root_key",
    "day": "day",
    "purpose": "purpose",
}


def _where(where: UsageFilter) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in (
        ("at >= ?", where.since.isoformat() if where.since else None),
        ("day = ?", where.day),
        ("root_key = ?", where.root_key),
        ("session_key = ?", where.session_key),
        ("agent_id = ?", where.agent_id),
    ):
        if value is not None:
            clauses.append(column)
            params.append(value)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def _totals(row: Any) -> UsageTotals:
    calls, input_tokens, cached, output_tokens, cost, unpriced, failed = row
    return UsageTotals(
        calls=calls,
        input_tokens=input_tokens,
        cached_tokens=cached,
        output_tokens=output_tokens,
        cost_nanousd=cost,
        unpriced=unpriced,
        failed=failed,
    )


def _record(raw: Any) -> UsageRecord:
    row = _Row._make(raw)
    return UsageRecord(
        id=row.id,
        at=datetime.fromisoformat(row.at),
        session_key=row.session_key,
        agent_id=row.agent_id,
        chain=row.chain,
        root_key=row.root_key,
        turn_id=row.turn_id,
        purpose=cast(Purpose, row.purpose),
        model=row.model,
        provider=row.provider,
        input_tokens=row.input_tokens,
        cached_tokens=row.cached_tokens,
        output_tokens=row.output_tokens,
        cost_nanousd=row.cost_nanousd,
        latency_ms=row.latency_ms,
        outcome=row.outcome,
    )


class SqliteUsage:
    def __init__(self, database: Database) -> None:
        self._database = database

    def record(self, record: UsageRecord) -> None:
        params = (
            record.at.isoformat(),
            record.day,
            record.session_key,
            record.agent_id,
            record.chain,
            record.root_key,
            record.turn_id,
            record.purpose,
            record.model,
            record.provider,
            record.input_tokens,
            record.cached_tokens,
            record.output_tokens,
            record.cost_nanousd,
            record.latency_ms,
            record.outcome,
        )

        def insert(db: sqlite3.Connection) -> None:
            db.execute(_INSERT, params)

        # no call waits for its row: it rides on the next commit (see GroupCommit.soon)
        self._database.soon(insert)

    async def totals(self, where: UsageFilter) -> UsageTotals:
        await self._database.write_soon_rows()
        clause, params = _where(where)
        row = await self._database.fetchone(
            f"SELECT {_SUMS} FROM usage{clause}", params, small=True
        )
        return _totals(row)

    async def grouped(self, by: UsageGrouping, where: UsageFilter) -> list[UsageGroup]:
        await self._database.write_soon_rows()
        column = _GROUP_COLUMN[by]
        clause, params = _where(where)
        order = "key" if by == "day" else "sum(cost_nanousd) DESC, count(*) DESC, key"
        rows = await self._database.fetchall(
            f"SELECT coalesce({column}, '-') AS key, {_SUMS} FROM usage{clause}"
            f" GROUP BY key ORDER BY {order}",
            params,
        )
        groups = []
        for key, *sums in rows:
            groups.append(UsageGroup(key=key, totals=_totals(sums)))
        return groups

    async def rows(self, where: UsageFilter) -> list[UsageRecord]:
        await self._database.write_soon_rows()
        clause, params = _where(where)
        rows = await self._database.fetchall(
            f"SELECT {_COLUMNS} FROM usage{clause} ORDER BY id", params
        )
        return [_record(row) for row in rows]
