"""Access: DM pairing requests (``pairing_requests``) and the senders the owner approved
(``approved_senders``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from clawbot.errors import StoreError
from clawbot.routing.pairing import PairingRequest, stamp
from clawbot.store.sql import Connection, SqlDatabase

_PAIRING_COLUMNS = "channel, code, sender_id, sender_name, chat_id, status, created_at, expires_at"


def _request(
    channel: str,
    code: str,
    sender_id: str,
    sender_name: str,
    chat_id: str,
    status: str,
    created_at: str,
    expires_at: str,
) -> PairingRequest:
    """A PairingRequest from the columns of ``_PAIRING_COLUMNS``, in that order."""
    return PairingRequest(
        channel=channel,
        code=code,
        sender_id=sender_id,
        sender_name=sender_name,
        chat_id=chat_id,
        status=status,
        created_at=datetime.fromisoformat(created_at),
        expires_at=datetime.fromisoformat(expires_at),
    )


class SqlAccess:
    """Who may talk to the bot without pairing first."""

    def __init__(self, database: SqlDatabase) -> None:
        self._database = database

    async def is_approved_sender(self, channel: str, sender_id: str) -> bool:
        row = await self._database.fetchone(
            "SELECT 1 FROM approved_senders WHERE channel = ? AND sender_id = ?",
            (channel, sender_id),
            flush=False,
        )
        return row is not None


class SqlPairing:
    """Pairing requests: created for unknown senders, decided by the owner."""

    def __init__(self, database: SqlDatabase) -> None:
        self._database = database

    async def request(
        self,
        *,
        channel: str,
        sender_id: str,
        sender_name: str,
        chat_id: str,
        now: datetime,
        expires_at: datetime,
        max_pending: int,
        new_code: Callable[[], str],
    ) -> PairingRequest | None:
        """The sender's pending pairing request, created if needed; None when the channel
        already has ``max_pending`` requests waiting. One transaction, so concurrent
        messages can neither exceed the cap nor give one sender two codes."""
        at = stamp(now)
        select = (
            f"SELECT {_PAIRING_COLUMNS} FROM pairing_requests"
            " WHERE channel = ? AND sender_id = ? AND status = 'pending'"
        )

        def write(db: Connection) -> PairingRequest | None:
            db.execute(
                "UPDATE pairing_requests SET status = 'expired', decided_at = ?"
                " WHERE status = 'pending' AND expires_at <= ?",
                (at, at),
            )
            for _attempt in range(10):
                row = db.execute(select, (channel, sender_id)).fetchone()
                if row is not None:
                    return _request(*row)
                # ON CONFLICT rather than catching a unique violation: on PostgreSQL
                # that would abort the whole transaction.
                inserted = db.execute(
                    "INSERT INTO pairing_requests (channel, code, sender_id, sender_name,"
                    " chat_id, status, created_at, expires_at)"
                    " SELECT ?, ?, ?, ?, ?, 'pending', ?, ? WHERE (SELECT count(*) FROM"
                    " pairing_requests WHERE channel = ? AND status = 'pending') < ?"
                    " ON CONFLICT DO NOTHING",
                    (
                        channel,
                        new_code(),
                        sender_id,
                        sender_name,
                        chat_id,
                        at,
                        stamp(expires_at),
                        channel,
                        max_pending,
                    ),
                )
                if inserted.rowcount == 1:
                    continue  # read back by the select above
                (waiting,) = db.execute(
                    "SELECT count(*) FROM pairing_requests WHERE channel = ?"
                    " AND status = 'pending'",
                    (channel,),
                ).fetchone()
                if waiting >= max_pending:
                    return None
                # otherwise the code is taken on this channel: draw another
            raise StoreError("could not draw an unused pairing code", hint="try again")

        return await self._database.transaction(write)

    async def get(self, channel: str, code: str) -> PairingRequest | None:
        row = await self._database.fetchone(
            f"SELECT {_PAIRING_COLUMNS} FROM pairing_requests WHERE channel = ? AND code = ?",
            (channel, code),
        )
        return _request(*row) if row is not None else None

    async def pending(self, now: datetime) -> list[PairingRequest]:
        """Requests still waiting for the owner, oldest first."""
        rows = await self._database.fetchall(
            f"SELECT {_PAIRING_COLUMNS} FROM pairing_requests"
            " WHERE status = 'pending' AND expires_at > ? ORDER BY created_at",
            (stamp(now),),
        )
        return [_request(*row) for row in rows]

    async def decide(self, channel: str, code: str, *, approve: bool, now: datetime) -> bool:
        """Approve (remembering the sender) or reject a pending, unexpired request, in one
        transaction; False when there was no such request."""
        at = stamp(now)

        def write(db: Connection) -> bool:
            changed = db.execute(
                "UPDATE pairing_requests SET status = ?, decided_at = ?"
                " WHERE channel = ? AND code = ? AND status = 'pending' AND expires_at > ?",
                ("approved" if approve else "rejected", at, channel, code, at),
            )
            if changed.rowcount != 1:
                return False
            if approve:
                db.execute(
                    "INSERT INTO approved_senders (channel, sender_id, sender_name,"
                    " approved_at, code) SELECT channel, sender_id, sender_name, ?, code"
                    " FROM pairing_requests WHERE channel = ? AND code = ?"
                    " ON CONFLICT (channel, sender_id) DO UPDATE SET"
                    " sender_name = excluded.sender_name, approved_at = excluded.approved_at,"
                    " code = excluded.code",
                    (at, channel, code),
                )
            return True

        return await self._database.transaction(write)
