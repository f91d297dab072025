"""What the model calls used and cost, from the usage ledger: totals for today (UTC), the
last 7 days and all time, and one period's calls grouped by agent, model, root session,
day or purpose, as ``clawbot usage`` groups them; the groups add up exactly to the total
row (the ledger keeps whole billionths of a dollar). A cost whose price is unknown is
shown as unknown, never as $0."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, timedelta
from typing import get_args

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from clawbot.console.context import ConsoleContext
from clawbot.console.rendering import render
from clawbot.runtime.usage import UsageFilter, UsageGrouping, UsageTotals, format_usd

PERIODS = {"today": "Today", "7d": "Last 7 days", "all": "All time"}
GROUPINGS: tuple[UsageGrouping, ...] = get_args(UsageGrouping)


def cost_text(totals: UsageTotals) -> str:
    """``$0.012``; ``unknown`` when no answered call had a price; ``$0.012 + unknown (2
    calls without a price)`` when some had none."""
    if not totals.unpriced:
        return format_usd(totals.cost_usd)
    unpriced = "1 call" if totals.unpriced == 1 else f"{totals.unpriced:,} calls"
    if totals.unpriced == totals.calls - totals.failed and not totals.cost_nanousd:
        return f"unknown ({unpriced} without a price)"
    return f"{format_usd(totals.cost_usd)} + unknown ({unpriced} without a price)"


@dataclass(frozen=True)
class UsageLine:
    """A row of the page: a period or a group, its totals and its cost as shown."""

    key: str
    totals: UsageTotals
    cost: str


def _line(key: str, totals: UsageTotals) -> UsageLine:
    return UsageLine(key, totals, cost_text(totals))


def _filters(context: ConsoleContext) -> dict[str, UsageFilter]:
    now = context.clock.now().astimezone(UTC)
    return {
        "today": UsageFilter(day=now.date().isoformat()),
        "7d": UsageFilter(since=now - timedelta(days=7)),
        "all": UsageFilter(),
    }


async def usage_page(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console
    asked = request.query_params.get("by", "day")
    by: UsageGrouping = next((name for name in GROUPINGS if name == asked), "day")
    period = request.query_params.get("period", "all")
    period = period if period in PERIODS else "all"
    filters = _filters(context)
    usage = context.store.usage
    periods = [_line(PERIODS[name], await usage.totals(where)) for name, where in filters.items()]
    groups = await usage.grouped(by, filters[period])
    return render(
        request,
        "usage.html",
        periods=periods,
        groups=[_line(group.key, group.totals) for group in groups],
        total=_line("total", await usage.totals(filters[period])),
        by=by,
        groupings=GROUPINGS,
        period=period,
        period_names=PERIODS,
    )


routes = [Route("/usage", usage_page)]
