"""Approval requests (``approvals``) and capability grants (``grants``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from clawbot.policies import Risk
from clawbot.redaction import redactor
from clawbot.security.approval_records import (
    ApprovalRequest,
    ApprovalScope,
    ApprovalStatus,
    Grant,
    GrantScope,
    OpenedRequest,
)
from clawbot.security.paused_rounds import PausedRound
from clawbot.store.database import Database

_REQUEST_COLUMNS = (
    "id, call_key, session_key, root_key, turn_id, trace_id, tool, resource, risk, chain, summary,"
    " status, scope, answered_by, created_at, expires_at, answered_at, message_id"
)
_GRANT_COLUMNS = (
    "id, session_key, root_key, root_epoch, tool, resource, scope, run_id, approval_id, created_at"
)


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _request(row: Sequence[Any]) -> ApprovalRequest:
    (
        request_id,
        call_key,
        session_key,
        root_key,
        turn_id,
        trace_id,
        tool,
        resource,
        risk,
        chain,
        summary,
        status,
        scope,
        answered_by,
        created_at,
        expires_at,
        answered_at,
        message_id,
    ) = row
    return ApprovalRequest(
        id=request_id,
        call_key=call_key,
        session_key=session_key,
        root_key=root_key,
        turn_id=turn_id,
        trace_id=trace_id,
        tool=tool,
        resource=resource,
        risk=cast(Risk, risk),
        chain=chain,
        summary=summary,
        status=cast(ApprovalStatus, status),
        scope=cast(ApprovalScope | None, scope),
        answered_by=answered_by,
        created_at=datetime.fromisoformat(created_at),
        expires_at=datetime.fromisoformat(expires_at),
        answered_at=_time(answered_at),
        message_id=message_id,
    )


def _grant(row: Sequence[Any]) -> Grant:
    (grant_id, session_key, root_key, epoch, tool, resource, scope, run_id, approval, at) = row
    return Grant(
        id=grant_id,
        session_key=session_key,
        root_key=root_key,
        root_epoch=epoch,
        tool=tool,
        resource=resource,
        scope=cast(GrantScope, scope),
        run_id=run_id,
        approval_id=approval,
        created_at=datetime.fromisoformat(at),
    )


class SqliteApprovals:
    def __init__(self, database: Database) -> None:
        self._database = database

    async def open_request(
        self, request: ApprovalRequest, paused: PausedRound | None = None
    ) -> OpenedRequest | None:
        """Store a new request, with the round its call waits in (masked like a transcript
        row), or find the one already stored for the same call (a turn re-run after a
        restart asks again). None when the id is already another call's: the caller draws
        another."""
        round_json = redactor.redact(paused.to_json()) if paused is not None else None

        def upsert(db: sqlite3.Connection) -> OpenedRequest | None:
            cursor = db.execute(
                f"INSERT OR IGNORE INTO approvals ({_REQUEST_COLUMNS}, round_json) VALUES"
                " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    request.id,
                    request.call_key,
                    request.session_key,
                    request.root_key,
                    request.turn_id,
                    request.trace_id,
                    request.tool,
                    request.resource,
                    request.risk,
                    request.chain,
                    request.summary,
                    request.status,
                    request.scope,
                    request.answered_by,
                    request.created_at.isoformat(),
                    request.expires_at.isoformat(),
                    None,
                    request.message_id,
                    round_json,
                ),
            )
            row = db.execute(
                f"SELECT {_REQUEST_COLUMNS} FROM approvals WHERE call_key = ?",
                (request.call_key,),
            ).fetchone()
            if row is None:
                return None
            return OpenedRequest(_request(row), new=cursor.rowcount == 1)

        return await self._database.transaction(upsert)

    async def get(self, request_id: str) -> ApprovalRequest | None:
        row = await self._database.fetchone(
            f"SELECT {_REQUEST_COLUMNS} FROM approvals WHERE id = ?", (request_id,), small=True
        )
        return _request(row) if row else None

    async def pending(self) -> list[ApprovalRequest]:
        """Every request still waiting for an answer, oldest first."""
        rows = await self._database.fetchall(
            f"SELECT {_REQUEST_COLUMNS} FROM approvals WHERE status = 'pending'"
            " ORDER BY created_at, id"
        )
        return [_request(row) for row in rows]

    async def sent_as(self, request_id: str, message_id: str) -> None:
        """Remember the platform message that asked (to edit once the request is answered)."""
        await self._database.write(
            "UPDATE approvals SET message_id = ? WHERE id = ?", (message_id, request_id)
        )

    async def answer(
        self,
        request_id: str,
        *,
        status: ApprovalStatus,
        scope: ApprovalScope | None,
        answered_by: str | None,
        at: datetime,
    ) -> bool:
        """Record the answer of a pending request; False when it was no longer pending."""
        changed = await self._database.write(
            "UPDATE approvals SET status = ?, scope = ?, answered_by = ?, answered_at = ?"
            " WHERE id = ? AND status = 'pending'",
            (status, scope, answered_by, at.isoformat(), request_id),
        )
        return changed == 1

    async def paused_round(self, turn_id: str) -> PausedRound | None:
        """The round a turn last waited in for an approval, while it is saved (a lookup of
        a partial index that holds only saved rounds: cheap at every turn's start)."""
        row = await self._database.fetchone(
            "SELECT id, round_json FROM approvals WHERE turn_id = ? AND round_json IS NOT NULL"
            " ORDER BY created_at DESC, rowid DESC LIMIT 1",
            (turn_id,),
            small=True,
            flush=False,
        )
        if row is None:
            return None
        request_id, round_json = row
        return PausedRound.from_json(round_json, request_id=request_id)

    async def turns_with_rounds(self) -> set[str]:
        """The turns that have a saved round now (read once at a process's first turn)."""
        rows = await self._database.fetchall(
            "SELECT DISTINCT turn_id FROM approvals WHERE round_json IS NOT NULL", flush=False
        )
        return {turn_id for (turn_id,) in rows}

    async def clear_rounds(self, turn_id: str) -> int:
        """Forget the rounds a turn saved: they are in its transcript now."""
        return await self._database.write(
            "UPDATE approvals SET round_json = NULL WHERE turn_id = ? AND round_json IS NOT NULL",
            (turn_id,),
        )

    async def add_grant(self, grant: Grant) -> None:
        await self._database.write(
            "INSERT INTO grants (session_key, root_key, root_epoch, tool, resource, scope,"
            " run_id, approval_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                grant.session_key,
                grant.root_key,
                grant.root_epoch,
                grant.tool,
                grant.resource,
                grant.scope,
                grant.run_id,
                grant.approval_id,
                grant.created_at.isoformat(),
            ),
        )

    async def grants(self, session_key: str, tool: str) -> list[Grant]:
        """The grants a session holds for one tool (any scope, any epoch)."""
        rows = await self._database.fetchall(
            f"SELECT {_GRANT_COLUMNS} FROM grants WHERE session_key = ? AND tool = ?",
            (session_key, tool),
            small=True,
        )
        return [_grant(row) for row in rows]

    async def grants_under(self, root_key: str) -> list[Grant]:
        """Every grant given in a root session's chat (its own and its subagents'), oldest
        first."""
        rows = await self._database.fetchall(
            f"SELECT {_GRANT_COLUMNS} FROM grants WHERE root_key = ? ORDER BY id", (root_key,)
        )
        return [_grant(row) for row in rows]

    async def clear_grants(self, root_key: str) -> int:
        return await self._database.write("DELETE FROM grants WHERE root_key = ?", (root_key,))

    async def revoke_run(self, run_id: str) -> int:
        """Drop the grants of a run that ended."""
        return await self._database.write(
            "DELETE FROM grants WHERE scope = 'run' AND run_id = ?", (run_id,)
        )
