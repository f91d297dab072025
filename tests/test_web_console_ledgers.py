"""The console's schedules and usage pages over HTTP: every scheduled task listed (its
prompt shown as text), a live one cancelled through the path ``/schedule cancel`` takes
and audited as the operator's change, refused without the login's CSRF token; the usage
ledger's totals per period and its calls grouped, the groups adding up to the total, an
unknown price shown as unknown."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from clawbot.clock import ManualClock
from clawbot.runtime.usage import UsageRecord
from clawbot.schedules.book import ScheduleBook
from clawbot.schedules.records import ScheduledTask
from clawbot.testing import ScriptedModel

from .console_site import (
    Site,
    console_for,
    console_settings,
    conversation,
    csrf_of,
    logged_in,
    site,
)

__all__ = ["site"]

PLANTED = "<script>window.planted = 1</script>"


async def scheduled(site: Site, prompt: str = "water the plants") -> ScheduledTask:
    bot = site.bot
    session = await bot.store.sessions.get("memory:alice")
    if session is None:
        session = await conversation(bot, "memory:alice", ["hi", "hello"])
    book = ScheduleBook(settings=bot.settings, store=bot.store, clock=site.server.context.clock)
    return await book.create(session, "every 2 hours", prompt, created_by="test")


def call(
    at: datetime, *, model: str = "openai/gpt-x", agent: str = "main", cost: int | None = 1_500_000
) -> UsageRecord:
    """A call of 100 tokens in and 20 out costing ``cost`` billionths of a dollar."""
    return UsageRecord(
        at=at,
        purpose="turn",
        model=model,
        provider="openai",
        latency_ms=120.0,
        session_key="memory:alice",
        agent_id=agent,
        root_key="memory:alice",
        input_tokens=100,
        output_tokens=20,
        cost_nanousd=cost,
    )


def row_of(html: str, table: str, key: str) -> str:
    """The text of the row of ``table`` whose first cell is ``key``, tags dropped."""
    body = html.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    for row in re.findall(r"<tr>(.*?)</tr>", body, flags=re.S):
        cells = [
            re.sub(r"<[^>]+>", "", c).strip()
            for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, flags=re.S)
        ]
        if cells and cells[0] == key:
            return " | ".join(cells)
    raise AssertionError(f"no row {key!r} in {table}")


async def test_the_schedules_page_lists_a_task_with_its_prompt_as_text(site: Site) -> None:
    task = await scheduled(site, f"remind me {PLANTED}")
    async with logged_in(site) as client:
        page = (await client.get("/schedules")).text

    assert task.id in page and "memory:alice" in page and "every 2 hours" in page
    assert "&lt;script&gt;window.planted = 1&lt;/script&gt;" in page
    assert PLANTED not in page


async def test_a_cancel_without_the_csrf_token_is_refused(site: Site) -> None:
    task = await scheduled(site)
    async with logged_in(site) as client:
        response = await client.post(f"/schedules/{task.id}/cancel", data={})

    assert response.status_code == 403
    assert (await site.bot.store.schedules.get(task.id)).status == "active"  # type: ignore[union-attr]


async def test_a_cancel_with_another_logins_csrf_token_is_refused(site: Site) -> None:
    task = await scheduled(site)
    async with logged_in(site) as mine, logged_in(site) as theirs:
        their_token = csrf_of((await theirs.get("/schedules")).text)
        response = await mine.post(f"/schedules/{task.id}/cancel", data={"csrf": their_token})

    assert response.status_code == 403
    assert (await site.bot.store.schedules.get(task.id)).status == "active"  # type: ignore[union-attr]


async def test_a_task_cancelled_in_the_console_is_cancelled_and_audited_as_the_operator(
    site: Site,
) -> None:
    task = await scheduled(site)
    async with logged_in(site) as client:
        page = (await client.get("/schedules")).text
        response = await client.post(f"/schedules/{task.id}/cancel", data={"csrf": csrf_of(page)})

    assert f"Cancelled {task.id}." in response.text
    assert (await site.bot.store.schedules.get(task.id)).status == "cancelled"  # type: ignore[union-attr]
    assert await site.bot.store.schedules.live(None) == []
    records = [r for r in await site.bot.store.audit.all() if r.kind == "operator"]
    assert [(r.tool, r.arguments, r.agent_id) for r in records] == [
        ("schedule_cancel", {"task": task.id, "session": "memory:alice"}, "operator")
    ]
    assert '<td class="status">cancelled</td>' in response.text
    assert f'action="/schedules/{task.id}/cancel"' not in response.text


async def test_a_task_already_cancelled_is_not_cancelled_again(site: Site) -> None:
    task = await scheduled(site)
    await site.bot.store.schedules.cancel(task.id)
    async with logged_in(site) as client:
        page = (await client.get("/schedules")).text
        response = await client.post(f"/schedules/{task.id}/cancel", data={"csrf": csrf_of(page)})

    assert f"No live scheduled task {task.id} " in response.text
    assert [r for r in await site.bot.store.audit.all() if r.kind == "operator"] == []


async def test_the_usage_page_groups_recorded_calls_and_the_groups_add_up_to_the_total(
    site: Site,
) -> None:
    day = datetime(2030, 1, 31, 12, tzinfo=UTC)
    usage = site.bot.store.usage
    usage.record(call(day, model="openai/gpt-x"))
    usage.record(call(day, model="openai/gpt-x"))
    usage.record(call(day + timedelta(days=1), model="anthropic/claude-y", cost=500_000))
    async with logged_in(site) as client:
        by_model = (await client.get("/usage", params={"by": "model"})).text
        by_day = (await client.get("/usage", params={"by": "day"})).text

    assert (
        row_of(by_model, "usage-groups", "openai/gpt-x")
        == "openai/gpt-x | 2 | 200 | 0 | 40 | $0.0030 | 0"
    )
    assert (
        row_of(by_model, "usage-groups", "anthropic/claude-y")
        == "anthropic/claude-y | 1 | 100 | 0 | 20 | $0.00050 | 0"
    )
    assert row_of(by_model, "usage-groups", "total") == "total | 3 | 300 | 0 | 60 | $0.0035 | 0"
    assert row_of(by_day, "usage-groups", "2030-01-31").startswith("2030-01-31 | 2 |")
    assert row_of(by_day, "usage-groups", "2030-02-01").startswith("2030-02-01 | 1 |")
    assert (
        row_of(by_model, "usage-totals", "All time") == "All time | 3 | 300 | 0 | 60 | $0.0035 | 0"
    )


async def test_the_usage_totals_count_today_and_the_last_7_days_apart(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    now = datetime(2030, 1, 15, 12, tzinfo=UTC)
    settings = console_settings(tmp_path, scripted)
    async with console_for(settings, clock=ManualClock(now)) as site:
        usage = site.bot.store.usage
        usage.record(call(now))
        usage.record(call(now - timedelta(days=3)))
        usage.record(call(now - timedelta(days=30)))
        async with logged_in(site) as client:
            page = (await client.get("/usage")).text

    assert row_of(page, "usage-totals", "Today").startswith("Today | 1 |")
    assert row_of(page, "usage-totals", "Last 7 days").startswith("Last 7 days | 2 |")
    assert row_of(page, "usage-totals", "All time").startswith("All time | 3 |")


async def test_an_unknown_price_shows_as_unknown_never_as_zero(site: Site) -> None:
    day = datetime(2030, 1, 31, 12, tzinfo=UTC)
    usage = site.bot.store.usage
    usage.record(call(day, model="local/llama", agent="helper", cost=None))
    usage.record(call(day, model="openai/gpt-x", cost=2_000_000))
    async with logged_in(site) as client:
        page = (await client.get("/usage", params={"by": "model"})).text

    assert row_of(page, "usage-groups", "local/llama").endswith(
        "| unknown (1 call without a price) | 0"
    )
    assert row_of(page, "usage-groups", "openai/gpt-x").endswith("| $0.0020 | 0")
    assert row_of(page, "usage-groups", "total").endswith(
        "| $0.0020 + unknown (1 call without a price) | 0"
    )
    assert "$0.00 |" not in row_of(page, "usage-groups", "local/llama")
