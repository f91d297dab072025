"""``/usage [today|week|session]``: what this conversation's model calls used, its
subagents' included, added up from the usage ledger (``clawbot.runtime.metering``)."""

from __future__ import annotations

from datetime import timedelta

from clawbot.clock import Clock
from clawbot.commands.registry import CommandContext, CommandRegistry
from clawbot.runtime.metering import root_key_of
from clawbot.runtime.usage import UsageFilter
from clawbot.store.protocols.usage import UsageLedger

PERIODS = ("today", "week", "session")
USAGE = "Usage: /usage today, /usage week (the last 7 days) or /usage session (all of it)."


def register_usage_commands(registry: CommandRegistry, ledger: UsageLedger, clock: Clock) -> None:
    @registry.command(
        "usage",
        "what this conversation's model calls used and cost",
        usage="[today|week|session]",
    )
    async def _usage(ctx: CommandContext) -> str:
        period = ctx.args.strip().lower() or "today"
        if period not in PERIODS:
            return USAGE
        root = root_key_of(ctx.session)
        now = clock.now()
        where = {
            "today": UsageFilter(root_key=root, day=now.date().isoformat()),
            "week": UsageFilter(root_key=root, since=now - timedelta(days=7)),
            "session": UsageFilter(root_key=root),
        }[period]
        title = {
            "today": "today (UTC)",
            "week": "in the last 7 days",
            "session": "since it began",
        }[period]
        totals = await ledger.totals(where)
        lines = [f"This conversation {title}: {totals.describe()}."]
        if totals.calls:
            for by in ("purpose", "model"):
                groups = await ledger.grouped(by, where)
                if len(groups) > 1 or by == "model":
                    shown = "; ".join(f"{g.key} {g.totals.describe()}" for g in groups)
                    lines.append(f"By {by}: {shown}.")
        return "\n".join(lines)
