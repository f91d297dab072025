"""DM pairing: the one-time codes an unknown sender receives and the owner approves.

Codes are 8 characters from an alphabet without look-alikes (no 0/O, 1/I), so they survive
being read aloud or retyped from a phone screen.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
CODE_TTL = timedelta(hours=1)
MAX_PENDING_PER_CHANNEL = 3


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def normalize_code(code: str) -> str:
    """What the owner typed, as stored: codes are case-insensitive and may carry spaces."""
    return "".join(code.split()).upper()


def stamp(moment: datetime) -> str:
    """A UTC timestamp whose text order is its time order (fixed width, always microseconds)."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class PairingRequest:
    """An unknown DM sender waiting for the owner to approve their one-time code."""

    channel: str
    code: str
    sender_id: str
    sender_name: str
    chat_id: str
    status: str
    created_at: datetime
    expires_at: datetime
