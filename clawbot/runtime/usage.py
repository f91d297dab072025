"""What model calls used. Each call is a row of the usage ledger (:class:`UsageRecord`,
written by ``clawbot.runtime.metering``); a turn's calls are also kept in the
assistant entry's meta (``usage`` and ``cost_usd``, see
:class:`clawbot.runtime.replies.ModelReply`), summed over a turn for a subagent's report or
over a session for the listings, and shown compactly.

Unknown stays unknown: a provider that counts no tokens, a model without a price, gives
None, never a made-up zero.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

USAGE_META = "usage"
"""The meta key of a call's token counts (``prompt_tokens``, ``completion_tokens``)."""
CACHED_TOKENS = "cached_tokens"
"""The usage key of the input tokens a provider read from its cache (part of the prompt's)."""
COUNTED = ("prompt_tokens", "completion_tokens")
"""The usage keys a call's tokens are the sum of (cached tokens are within the prompt's)."""
COST_META = "cost_usd"
"""The meta key of a call's cost in US dollars, when known."""


def tokens_of(metas: Iterable[Mapping[str, Any]]) -> int | None:
    """Tokens the calls these entry metas record used; None when none said."""
    total = 0
    known = False
    for meta in metas:
        usage = meta.get(USAGE_META)
        if isinstance(usage, dict):
            known = True
            total += sum(
                int(v)
                for key, v in usage.items()
                if key in COUNTED and isinstance(v, int | float) and not isinstance(v, bool)
            )
    return total if known else None


def cost_usd_of(metas: Iterable[Mapping[str, Any]]) -> float | None:
    """What the calls these entry metas record cost in US dollars; None when no call's
    cost is known."""
    costs = [
        float(cost)
        for meta in metas
        if isinstance(cost := meta.get(COST_META), int | float) and not isinstance(cost, bool)
    ]
    return sum(costs) if costs else None


def format_usd(cost: float) -> str:
    """A cost as a person reads it: ``$1.25``, and below a dollar two significant digits
    (``$0.012``, ``$0.000035``), since one model call costs fractions of a cent."""
    if cost >= 1 or cost <= 0 or not math.isfinite(cost):
        return f"${cost:,.2f}"
    rounded = float(f"{cost:.2g}")
    digits = max(2, 1 - math.floor(math.log10(rounded)))
    return f"${rounded:.{digits}f}"


NANOS_PER_USD = 1_000_000_000
"""The ledger keeps costs in billionths of a dollar: integers, so its totals are exact sums
of its rows (a float sum depends on the order it is added in)."""

Purpose = Literal["turn", "subagent", "compaction", "embedding", "transcription", "speech"]
"""Why a call was made: a person's conversation (``turn``), a subagent's or a delegate's
(``subagent``), a summary of an older conversation (``compaction``), memory vectors
(``embedding``), a voice note heard (``transcription``) or a reply read aloud (``speech``)."""
OK = "ok"
"""The outcome of a call that answered; a failed one names its failure (``RateLimitError``)."""


def to_nanos(cost_usd: float | None) -> int | None:
    """A cost in US dollars as the ledger keeps it; None (unknown) stays None."""
    return None if cost_usd is None else round(cost_usd * NANOS_PER_USD)


@dataclass(frozen=True)
class UsageRecord:
    """One call in the usage ledger: when, for whom (session, agent, the chain of agents
    from the root, the root conversation it rolls up to, the turn), why, which model at
    which provider, the tokens it used (``cached_tokens``: the part of the input the
    provider read from its cache), what it cost in billionths of a dollar, how long it took
    and how it ended. Counts and cost are None when unknown, never 0."""

    at: datetime
    purpose: Purpose
    model: str
    provider: str
    latency_ms: float
    outcome: str = OK
    session_key: str | None = None
    agent_id: str | None = None
    chain: str | None = None
    root_key: str | None = None
    turn_id: str | None = None
    input_tokens: int | None = None
    cached_tokens: int | None = None
    output_tokens: int | None = None
    cost_nanousd: int | None = None
    id: int | None = None

    @property
    def day(self) -> str:
        """The UTC date of the call, ``2030-01-31``: what per-day totals group by."""
        return self.at.astimezone(UTC).date().isoformat()

    @property
    def cost_usd(self) -> float | None:
        return None if self.cost_nanousd is None else self.cost_nanousd / NANOS_PER_USD

    @property
    def tokens(self) -> int:
        """Input and output tokens, the unknown counted as none."""
        return (self.input_tokens or 0) + (self.output_tokens or 0)


@dataclass(frozen=True)
class UsageTotals:
    """What a set of calls used, added up: calls, tokens, the cost of the calls whose price
    is known, how many answered without one (``unpriced``: their cost is missing from
    ``cost_nanousd``) and how many failed."""

    calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    cost_nanousd: int = 0
    unpriced: int = 0
    failed: int = 0

    @property
    def cost_usd(self) -> float:
        return self.cost_nanousd / NANOS_PER_USD

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def plus(self, record: UsageRecord) -> UsageTotals:
        """These totals with one more call."""
        answered = record.outcome == OK
        return UsageTotals(
            calls=self.calls + 1,
            input_tokens=self.input_tokens + (record.input_tokens or 0),
            cached_tokens=self.cached_tokens + (record.cached_tokens or 0),
            output_tokens=self.output_tokens + (record.output_tokens or 0),
            cost_nanousd=self.cost_nanousd + (record.cost_nanousd or 0),
            unpriced=self.unpriced + (answered and record.cost_nanousd is None),
            failed=self.failed + (not answered),
        )

    def describe(self) -> str:
        """``$0.012 in 3 calls, 1,234 tokens in, 56 out``, with what is unknown said."""
        if not self.calls:
            return "no model calls"
        calls = "1 call" if self.calls == 1 else f"{self.calls:,} calls"
        text = (
            f"{format_usd(self.cost_usd)} in {calls}, {self.input_tokens:,} tokens in"
            f" ({self.cached_tokens:,} cached), {self.output_tokens:,} out"
        )
        if self.unpriced:
            text += f"; {self.unpriced:,} without a known price (not in the cost)"
        if self.failed:
            text += f"; {self.failed:,} failed"
        return text


@dataclass(frozen=True)
class UsageFilter:
    """Which calls a total or a listing covers: since a time, on a UTC day, of a root
    conversation (its subagents' calls included), of one session or of one agent; every
    condition left None covers all."""

    since: datetime | None = None
    day: str | None = None
    root_key: str | None = None
    session_key: str | None = None
    agent_id: str | None = None


UsageGrouping = Literal["agent", "model", "session", "day", "purpose"]
"""What ``clawbot usage --by`` groups calls by (``session``: the root conversation)."""


@dataclass(frozen=True)
class UsageGroup:
    """The totals of one group of a listing: ``key`` is the agent, model, root session or
    day (``-`` where a call had none)."""

    key: str
    totals: UsageTotals
