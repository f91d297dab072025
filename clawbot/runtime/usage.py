"""What model calls used: the tokens and the cost litellm reports for each call, kept in the
assistant entry's meta (``usage`` and ``cost_usd``, see
:class:`clawbot.runtime.replies.ModelReply`), summed over a turn for a subagent's report or
over a session for the listings, and shown compactly.

Unknown stays unknown: a provider that counts no tokens, a model without a price, gives
None, never a made-up zero.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

USAGE_META = "usage"
"""The meta key of a call's token counts (``prompt_tokens``, ``completion_tokens``)."""
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
            total += sum(int(v) for v in usage.values() if isinstance(v, int | float))
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
