"""``clawbot usage``: what the bot's model calls used and cost, from the usage ledger,
grouped by agent, model, root session, day or purpose, as a table, JSON or CSV. The
groups add up exactly to the total line (costs are kept as whole billionths of a dollar).
Read-only, so it works beside a running bot."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clawbot.cli.common import HomeOption, fail, load, with_store

if TYPE_CHECKING:
    from clawbot.runtime.usage import UsageGroup, UsageTotals
    from clawbot.store import Store

BY = ("agent", "model", "session", "day", "purpose")
FORMATS = ("text", "json", "csv")
COLUMNS = (
    "calls",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "cost_usd",
    "unpriced",
    "failed",
)
_AGO = re.compile(r"^(\d+)\s*([hd])$")


def since_time(text: str, now: datetime) -> datetime:
    """``7d``, ``24h``, ``2030-01-31`` or ``2030-01-31T12:00`` as a UTC time; a clear
    error otherwise."""
    ago = _AGO.match(text.strip().lower())
    if ago:
        amount, unit = int(ago[1]), ago[2]
        return now - (timedelta(days=amount) if unit == "d" else timedelta(hours=amount))
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        fail(f"--since {text!r} is neither a date (2030-01-31) nor a span (7d, 24h)")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def usage(
    by: Annotated[
        str, typer.Option("--by", help="group by agent, model, session, day or purpose")
    ] = "day",
    since: Annotated[
        str | None, typer.Option("--since", help="from a date (2030-01-31) or a span ago (7d)")
    ] = None,
    format: Annotated[str, typer.Option("--format", help="text, json or csv")] = "text",
    home: HomeOption = None,
) -> None:
    """What the model calls used and cost, grouped, with the total (subagents' calls count
    in the session they roll up to)."""
    from clawbot.runtime.usage import UsageFilter

    if by not in BY:
        fail(f"--by {by!r}: use one of {', '.join(BY)}")
    if format not in FORMATS:
        fail(f"--format {format!r}: use one of {', '.join(FORMATS)}")
    settings = load(home=home)
    where = UsageFilter(since=since_time(since, datetime.now(UTC)) if since else None)

    async def read(store: Store) -> tuple[list[UsageGroup], UsageTotals]:
        return await store.usage.grouped(by, where), await store.usage.totals(where)  # type: ignore[arg-type]

    groups, total = with_store(settings, read)
    print(render(by, groups, total, format), end="")


def _values(totals: UsageTotals) -> dict[str, Any]:
    return {
        "calls": totals.calls,
        "input_tokens": totals.input_tokens,
        "cached_tokens": totals.cached_tokens,
        "output_tokens": totals.output_tokens,
        "cost_usd": totals.cost_nanousd / 1_000_000_000,
        "unpriced": totals.unpriced,
        "failed": totals.failed,
    }


def render(by: str, groups: list[UsageGroup], total: UsageTotals, format: str) -> str:
    """The listing in ``format``: ``text`` a table, ``json`` one object, ``csv`` a header,
    a row per group and a ``total`` row."""
    import csv
    import io
    import json

    if format == "json":
        document = {
            "by": by,
            "groups": [{by: g.key, **_values(g.totals)} for g in groups],
            "total": _values(total),
        }
        return json.dumps(document, indent=2) + "\n"
    if format == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([by, *COLUMNS])
        for group in groups:
            writer.writerow([group.key, *_values(group.totals).values()])
        writer.writerow(["total", *_values(total).values()])
        return out.getvalue()
    if not total.calls:
        return "No model calls recorded.\n"
    rows = [(g.key, g.totals) for g in groups] + [("total", total)]
    width = max(len(key) for key, _ in rows)
    lines = [f"{key:<{width}}  {totals.describe()}" for key, totals in rows]
    return "\n".join(lines) + "\n"
