"""The web console in a real browser: Debian's chromium driven by playwright (the
system's browser, never one downloaded). Log in, find a session, watch a running
subagent tree change, approve a waiting call and see the turn go on in the chat, edit an
agent, be refused without the token, and never run a planted script. A screenshot of
each page goes to tests/artifacts/console/."""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright, expect

from clawbot.routing.sessions import child_key
from clawbot.runtime.usage import UsageRecord
from clawbot.schedules.book import ScheduleBook
from clawbot.testing import MemoryChannel, ScriptedModel, call

from .console_site import Site, conversation, running_turn, site

__all__ = ["site"]

ARTIFACTS = Path(__file__).resolve().parent / "artifacts" / "console"
PLANTED = "<script>window.planted = 1</script><img src=x onerror='window.planted = 2'>"


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "the browser tests need Debian's chromium (apt-get install chromium)"
    return found


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as driver:
        launched = await driver.chromium.launch(
            executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"]
        )
        yield launched
        await launched.close()


@pytest.fixture
async def page(browser: Browser, site: Site) -> AsyncIterator[Page]:
    """A tab whose operator logged in with the printed URL."""
    context = await browser.new_context()
    tab = await context.new_page()
    await tab.goto(site.login_url)
    yield tab
    await context.close()


async def snap(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


async def test_the_login_url_opens_the_sessions_page_and_search_finds_a_session(
    site: Site, page: Page
) -> None:
    await conversation(site.bot, "memory:alice", ["hello", "hi"])
    await conversation(site.bot, "memory:bob", ["hey", "yo"])

    await page.goto(f"{site.base}/")
    await page.fill("input[name=q]", "alice")
    await page.click("main form button[type=submit]")

    rows = page.locator("#sessions tbody tr")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text("memory:alice")
    await snap(page, "sessions")
    await page.click("text=memory:alice")
    await expect(page.locator(".entry")).to_have_count(2)
    await snap(page, "conversation")


async def test_a_browser_without_the_token_is_refused(browser: Browser, site: Site) -> None:
    context = await browser.new_context()
    tab = await context.new_page()

    response = await tab.goto(f"{site.base}/login?token=guessed")
    again = await tab.goto(f"{site.base}/")

    assert response is not None and response.status == 401
    assert again is not None and again.status == 401
    await context.close()


async def test_a_running_subagent_tree_updates_live(site: Site, page: Page) -> None:
    bot = site.bot
    parent = await conversation(bot, "memory:boss", ["research this"])
    child = await conversation(
        bot, child_key(parent.key, "r1"), [], agent_id="main", owner=parent.key
    )
    turn = await running_turn(bot, child)

    await page.goto(f"{site.base}/tree?key=memory:boss")
    node = page.locator(f'#tree tr[data-key="{child.key}"] .status')
    await expect(node).to_have_text("running")
    await snap(page, "tree")
    await bot.store.jobs.finish(child, turn, [], status="done")

    await expect(node).to_have_text("done")


async def test_approving_a_waiting_call_lets_the_turn_go_on_in_the_chat(
    site: Site, page: Page, scripted: ScriptedModel
) -> None:
    bot = site.bot
    channel = bot.outbox.adapter("memory")
    assert isinstance(channel, MemoryChannel)
    scripted.add(call("file_write", path="notes.md", content="hi"), "Written.")
    receipt = await bot.router.receive(channel.message("write notes.md"))
    await channel.sent_when(lambda m: "Approval needed (" in m.text)

    await page.goto(f"{site.base}/approvals")
    await expect(page.locator("#approvals tbody tr[data-id]")).to_have_count(1)
    await snap(page, "approvals")
    await page.click("button[value=once]")
    await expect(page.locator(".notice")).to_contain_text("Approved once: file_write")

    await receipt.wait()
    assert channel.texts[-1] == "Written."
    assert (bot.workspace.root / "notes.md").read_text() == "hi"
    answers = [r for r in await bot.store.audit.all() if r.kind == "approval"]
    assert [r.approval_result for r in answers] == ["approved once by operator (console)"]


async def test_an_agent_edited_in_the_browser_is_saved(site: Site, page: Page) -> None:
    await page.goto(f"{site.base}/agents/main")
    text = await page.input_value("#toml")
    lines = [
        'description = "Edited."' if line.startswith("description =") else line
        for line in text.splitlines()
    ]
    await page.fill("#toml", "\n".join(lines))
    await snap(page, "agent")
    await page.click("main form button[type=submit]")

    await expect(page.locator("h1 + p")).to_have_text("Edited.")
    assert site.bot.agents.get("main").description == "Edited."


async def planted_task_and_calls(site: Site) -> None:
    """A scheduled task whose prompt is a script, and two calls (one without a price)."""
    bot = site.bot
    eve = await bot.store.sessions.get("memory:eve")
    assert eve is not None
    book = ScheduleBook(settings=bot.settings, store=bot.store, clock=site.server.context.clock)
    await book.create(eve, "every 2 hours", PLANTED)
    now = site.server.context.clock.now()
    for model, cost in (("openai/gpt-x", 1_500_000), (PLANTED[:40], None)):
        bot.store.usage.record(
            UsageRecord(
                at=now,
                purpose="turn",
                model=model,
                provider="openai",
                latency_ms=100.0,
                session_key="memory:eve",
                agent_id="main",
                root_key="memory:eve",
                input_tokens=100,
                output_tokens=20,
                cost_nanousd=cost,
            )
        )


async def test_a_planted_script_never_runs_on_any_page(site: Site, page: Page) -> None:
    bot = site.bot
    await conversation(bot, "memory:eve", [PLANTED, "ok"])
    from clawbot.agents.profiles import AgentSpec

    await bot.agents.create(AgentSpec(agent_id="evil", name=PLANTED[:60]))
    await bot.store.memories.put(
        namespace="main", key="x", text=PLANTED, tags=(), session_key="memory:eve", agent_id="main"
    )
    await planted_task_and_calls(site)
    pages = {
        "conversation-planted": "/conversation?key=memory:eve",
        "agents": "/agents",
        "memory": "/memory",
        "audit": "/audit",
        "logs": "/logs",
        "subagents": "/trees",
        "setup": "/setup",
        "schedules": "/schedules",
        "usage": "/usage?by=model",
    }
    for name, path in pages.items():
        await page.goto(f"{site.base}{path}")
        await snap(page, name)
        assert await page.evaluate("window.planted === undefined"), path

    await page.goto(f"{site.base}/memory")
    await expect(page.locator("#memories td.text")).to_have_text(PLANTED)


async def test_the_log_page_shows_new_lines_live_with_secrets_masked(
    site: Site, page: Page
) -> None:
    secret = "sk-" + "z9y8x7w6v5u4t3s2r1q0p9o8"
    await page.goto(f"{site.base}/logs")
    await asyncio.wait_for(site.server.context.logs.followed.wait(), 30)

    logging.getLogger("clawbot.test").warning("live line with %s", secret)

    await expect(page.locator("#log div", has_text="live line with [redacted]")).to_be_visible()
    assert secret not in await page.content()
