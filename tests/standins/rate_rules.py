"""Rate rules as the platform stand-ins enforce them: how often a bot may post to one chat.

Each stand-in states its platform's documented rates (the numbers and where they come from
are in its own module) as limits from this module, and asks a :class:`RateBook` before it
takes a call that posts to a chat. Over a limit, the call is refused the way the platform
refuses it (HTTP 429 and a ``retry_after``), and the book remembers until when: a call to that
chat before then is refused again and counted as *unhonoured* (Telegram lengthens a flood wait
for that; a well-behaved bot never makes one). The book also counts, per chat, the messages,
edits and drafts the stand-in took, so a test can say how a reply reached the chat.

Time is the book's ``clock`` (``time.monotonic`` unless a test freezes it), so a test can
exhaust a limit deterministically; a retry-after is rounded up to the platform's resolution
(whole seconds for Telegram and Slack, milliseconds for Discord).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

Clock = Callable[[], float]
Kind = Literal["message", "edit", "draft", "delete"]

HONOUR_TOLERANCE = 0.01
"""Seconds a call may come before a retry-after ends and still count as honouring it: the
bot's sleep and the stand-in's clock are two readings of one clock, a hair apart."""
EPSILON = 1e-6
"""Float slack in the limits: calls spaced exactly at a limit's pace (1.2 s at 50 a minute)
are within it, whatever the last bit of the sum of the intervals."""


class Limit(Protocol):
    """One rate rule for one key (a chat, or a whole workspace)."""

    def new_state(self) -> LimitState: ...


class LimitState(Protocol):
    def wait(self, now: float) -> float:
        """Seconds until one more call would be within the rule (0: now)."""
        ...

    def spend(self, now: float) -> None:
        """Count one call made at ``now``."""
        ...


@dataclass(frozen=True)
class TokenBucket:
    """``per_second`` calls a second on average, ``burst`` at once after a quiet spell:
    "short bursts allowed" as Telegram's and Slack's pages put it."""

    per_second: float
    burst: int

    def new_state(self) -> _BucketState:
        return _BucketState(self)


@dataclass
class _BucketState:
    rule: TokenBucket
    tokens: float = -1.0
    at: float = 0.0

    def _refill(self, now: float) -> None:
        if self.tokens < 0:
            self.tokens, self.at = float(self.rule.burst), now
            return
        gained = (now - self.at) * self.rule.per_second
        self.tokens, self.at = min(float(self.rule.burst), self.tokens + gained), now

    def wait(self, now: float) -> float:
        self._refill(now)
        return 0.0 if self.tokens >= 1.0 - EPSILON else (1.0 - self.tokens) / self.rule.per_second

    def spend(self, now: float) -> None:
        self._refill(now)
        self.tokens -= 1.0


@dataclass(frozen=True)
class SlidingWindow:
    """At most ``limit`` calls in any ``seconds``: Telegram's "20 messages per minute to the
    same group"."""

    limit: int
    seconds: float

    def new_state(self) -> _SlidingState:
        return _SlidingState(self)


@dataclass
class _SlidingState:
    rule: SlidingWindow
    calls: deque[float] = field(default_factory=deque)

    def wait(self, now: float) -> float:
        while self.calls and self.calls[0] <= now - self.rule.seconds + EPSILON:
            self.calls.popleft()
        if len(self.calls) < self.rule.limit:
            return 0.0
        return self.calls[0] + self.rule.seconds - now

    def spend(self, now: float) -> None:
        self.calls.append(now)


@dataclass(frozen=True)
class FixedWindow:
    """``limit`` calls per window of ``seconds`` that starts at its first call and then
    resets: Discord's buckets, whose state its ``X-RateLimit-*`` headers report."""

    limit: int
    seconds: float

    def new_state(self) -> FixedWindowState:
        return FixedWindowState(self)


@dataclass
class FixedWindowState:
    rule: FixedWindow
    used: int = 0
    ends: float = -math.inf

    def _roll(self, now: float) -> None:
        if now >= self.ends - EPSILON:
            self.used, self.ends = 0, -math.inf

    def wait(self, now: float) -> float:
        self._roll(now)
        return 0.0 if self.used < self.rule.limit else self.ends - now

    def spend(self, now: float) -> None:
        self._roll(now)
        if self.used == 0:
            self.ends = now + self.rule.seconds
        self.used += 1

    def remaining(self, now: float) -> int:
        self._roll(now)
        return self.rule.limit - self.used

    def reset_after(self, now: float) -> float:
        self._roll(now)
        return self.ends - now if self.used else self.rule.seconds


@dataclass
class ChatActivity:
    """What one chat received: calls the stand-in took, by kind, and calls it refused."""

    messages: int = 0
    edits: int = 0
    drafts: int = 0
    deletes: int = 0
    refused: int = 0
    """Calls answered 429 because of a rate rule."""
    unhonoured: int = 0
    """Calls that came before an earlier 429's retry-after had passed."""


@dataclass(frozen=True)
class Refusal:
    """A call over a limit: how long the platform asks to wait, and whether the call came
    while an earlier refusal's wait was still running."""

    retry_after: float
    unhonoured: bool


class RateBook:
    """The limits' state per key, the waits asked per chat, and each chat's activity."""

    def __init__(self, *, clock: Clock = time.monotonic, resolution: float = 1.0) -> None:
        self.clock = clock
        self.resolution = resolution
        """Retry-afters are rounded up to a multiple of this many seconds."""
        self.enabled = True
        self._states: dict[tuple[str, Limit], LimitState] = {}
        self._held: dict[tuple[str, str], float] = {}
        self._activity: dict[str, ChatActivity] = {}

    def activity(self, chat: str) -> ChatActivity:
        return self._activity.setdefault(chat, ChatActivity())

    def state(self, key: str, limit: Limit) -> LimitState:
        """The state of ``limit`` for ``key`` (one per pair, made on first use)."""
        state = self._states.get((key, limit))
        if state is None:
            state = self._states[(key, limit)] = limit.new_state()
        return state

    def admit(
        self, chat: str, limits: Sequence[tuple[str, Limit]], *, scope: str = ""
    ) -> Refusal | None:
        """Take one call to ``chat`` that counts against each (key, limit) of ``limits``:
        None when every limit has room (each is charged), else the refusal to answer.
        A refusal holds the chat's calls of the same ``scope`` (the platform's limits that
        answer for one another: all of a Telegram chat's, one Slack method's)."""
        if not self.enabled:
            return None
        now = self.clock()
        held = self._held.get((chat, scope), -math.inf)
        if now < held - HONOUR_TOLERANCE:
            activity = self.activity(chat)
            activity.refused += 1
            activity.unhonoured += 1
            return Refusal(self._round(held - now), unhonoured=True)
        states = [self.state(key, limit) for key, limit in limits]
        wait = max((state.wait(now) for state in states), default=0.0)
        if wait > 0:
            retry_after = self._round(wait)
            self._held[(chat, scope)] = now + retry_after
            self.activity(chat).refused += 1
            return Refusal(retry_after, unhonoured=False)
        for state in states:
            state.spend(now)
        return None

    def record(self, chat: str, kind: Kind) -> None:
        """Count a call the stand-in carried out."""
        activity = self.activity(chat)
        if kind == "message":
            activity.messages += 1
        elif kind == "edit":
            activity.edits += 1
        elif kind == "delete":
            activity.deletes += 1
        else:
            activity.drafts += 1

    def unhonoured(self) -> int:
        """Calls, over all chats, made while a retry-after still ran."""
        return sum(activity.unhonoured for activity in self._activity.values())

    def _round(self, seconds: float) -> float:
        steps = math.ceil(round(seconds / self.resolution, 9))
        return max(1, steps) * self.resolution
