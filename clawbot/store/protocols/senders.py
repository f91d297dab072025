"""The repositories of who may write to the bot: the senders the owner approved, and
the DM pairing requests of the ones still unknown."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from clawbot.routing.pairing import PairingRequest


class Access(Protocol):
    """The senders the owner approved."""

    async def is_approved_sender(self, channel: str, sender_id: str) -> bool: ...


class Pairing(Protocol):
    """DM pairing requests: created for unknown senders, decided by the owner."""

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
        """The sender's pending request, created if needed; None when the channel already
        has ``max_pending`` waiting."""
        ...

    async def get(self, channel: str, code: str) -> PairingRequest | None: ...

    async def pending(self, now: datetime) -> list[PairingRequest]:
        """Requests still waiting for the owner, oldest first."""
        ...

    async def decide(self, channel: str, code: str, *, approve: bool, now: datetime) -> bool:
        """Approve (remembering the sender) or reject a pending request; False when there
        was no such request."""
        ...
