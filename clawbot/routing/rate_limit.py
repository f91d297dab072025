"""A per-sender rate limit, so one flooding sender cannot starve everyone else.

A token bucket per sender (channel and sender id): ``burst`` messages at once, then one
every ``60 / per_minute`` seconds. Time is the message's own time (``received_at``, which
the adapters set to when the platform says it was sent), not the time it reaches us: a
backlog the platform hands over after a restart, or Discord's catch-up, arrives in one
burst but was written at a person's pace, and must not be refused for our downtime.

A message costs one token, or one for each file it carries when it carries more than one:
a flood of attachments is a flood, however few the messages (each file is downloaded, and
may be transcribed or shown to a model, at the bot's expense).

A refused message was never accepted, so nothing accepted is lost: the sender is told once
per flood (the next message let through resets that), and the rest is ignored quietly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from clawbot.lru import LRUCache
from clawbot.messages import InboundMessage

Verdict = Literal["admit", "refuse and tell", "refuse quietly"]

TRACKED_SENDERS = 10_000
"""Buckets kept in memory; a sender not seen for long starts over with a full bucket,
which is what an idle bucket would hold anyway."""


@dataclass
class _Bucket:
    tokens: float
    at: datetime
    told: bool = False


class SenderRateLimit:
    """``per_minute`` 0 turns the limit off. Channels in ``exempt`` (the operator's own
    terminal, the internal channel) are never limited."""

    def __init__(self, per_minute: int, burst: int, exempt: frozenset[str]) -> None:
        self.per_minute = per_minute
        self.burst = max(1, burst)
        self.exempt = exempt
        self._buckets: LRUCache[tuple[str, str], _Bucket] = LRUCache(TRACKED_SENDERS)

    def check(self, message: InboundMessage) -> Verdict:
        if self.per_minute <= 0 or message.channel in self.exempt:
            return "admit"
        key = (message.channel, message.sender_id)
        at = message.received_at
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = _Bucket(tokens=float(self.burst), at=at)
            self._buckets.put(key, bucket)
        elapsed = max(0.0, (at - bucket.at).total_seconds())
        bucket.tokens = min(float(self.burst), bucket.tokens + elapsed * self.per_minute / 60)
        bucket.at = max(bucket.at, at)
        cost = min(max(1, len(message.attachments)), self.burst)
        if bucket.tokens >= cost:
            bucket.tokens -= cost
            bucket.told = False
            return "admit"
        if bucket.told:
            return "refuse quietly"
        bucket.told = True
        return "refuse and tell"

    def wait_seconds(self) -> int:
        """How long a refused sender waits for the next message to be taken."""
        return max(1, round(60 / self.per_minute)) if self.per_minute > 0 else 0
