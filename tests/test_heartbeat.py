"""The heartbeat: HEARTBEAT.md's unchecked items run on an interval in the chat a person
last wrote to, quiet unless something needs attention, free when there is nothing to check."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from clawbot.agents.files import read_agent_file
from clawbot.app import Clawbot
from clawbot.clock import ManualClock
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ScriptedModel

from .conftest import add_agent
from .test_schedules import opened, run_due, say

START = datetime(2030, 1, 1, tzinfo=UTC)
CHECKLIST = "# Every half hour\n- [x] fed the cat\n- [ ] check the mail for invoices\n"


@pytest.fixture
def beating(settings: Settings) -> Settings:
    return settings.model_copy(update={"heartbeat_interval": 1800.0})


@pytest.fixture
async def bot(beating: Settings) -> AsyncIterator[Clawbot]:
    async with opened(beating, ManualClock(START)) as bot:
        yield bot


@pytest.fixture
def channel(bot: Clawbot) -> MemoryChannel:
    adapter = bot.outbox.adapter("memory")
    assert isinstance(adapter, MemoryChannel)
    return adapter


def checklist(bot: Clawbot, text: str, agent: str | None = None) -> None:
    folder = bot.settings.workspace_dir / ("agents/" + agent if agent else "")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "HEARTBEAT.md").write_text(text)


async def test_a_heartbeat_runs_the_unchecked_items_in_the_chat_last_written_to(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await say(bot, channel, "hi")
    checklist(bot, CHECKLIST)
    scripted.add("Two invoices are due today.")

    assert await run_due(bot) == 1

    assert channel.chat("chat1")[-1] == "Two invoices are due today."
    prompt = scripted.requests[-1].last_user_text
    assert "- [ ] check the mail for invoices" in prompt and "fed the cat" not in prompt
    jobs = await bot.store.jobs.for_session("memory:chat1")
    assert [j.lane for j in jobs].count("cron") == 1


async def test_a_heartbeat_reply_of_exactly_heartbeat_ok_sends_nothing(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await say(bot, channel, "hi")
    checklist(bot, CHECKLIST)
    shown = list(channel.chat("chat1"))
    scripted.add("HEARTBEAT_OK")

    assert await run_due(bot) == 1

    assert channel.chat("chat1") == shown
    assert len(channel.sent) == len(shown)


@pytest.mark.parametrize("text", [None, "", "# Checklist\n- [x] all done\n"])
async def test_an_absent_or_empty_checklist_costs_no_model_call(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel, text: str | None
) -> None:
    await say(bot, channel, "hi")
    if text is not None:
        checklist(bot, text)
    calls = len(scripted.requests)

    assert await run_due(bot) == 0

    assert len(scripted.requests) == calls


async def test_a_heartbeat_runs_once_a_slot_and_again_in_the_next(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await say(bot, channel, "hi")
    checklist(bot, CHECKLIST)
    assert await run_due(bot) == 1
    assert await run_due(bot) == 0
    clock = bot.schedules.clock
    assert isinstance(clock, ManualClock)
    clock.advance(1800)
    assert await run_due(bot) == 1


async def test_an_agents_own_interval_and_checklist_override_the_settings(
    settings: Settings, scripted: ScriptedModel
) -> None:
    clock = ManualClock(START)
    async with opened(settings, clock) as bot:  # no heartbeat by default
        channel = bot.outbox.adapter("memory")
        assert isinstance(channel, MemoryChannel)
        await add_agent(bot, "butler", heartbeat_interval=600.0)
        checklist(bot, CHECKLIST)
        checklist(bot, "- [ ] water the plants\n", agent="butler")
        await say(bot, channel, "hi")
        assert await run_due(bot) == 0  # main has no heartbeat
        await say(bot, channel, "/agent butler")
        await say(bot, channel, "hello butler")
        clock.advance(600)  # butler's next slot

        assert await run_due(bot) == 1

        assert "water the plants" in scripted.requests[-1].last_user_text


async def test_a_restart_within_the_same_slot_does_not_run_the_heartbeat_again(
    beating: Settings, scripted: ScriptedModel
) -> None:
    clock = ManualClock(START)
    async with opened(beating, clock) as bot:
        channel = bot.outbox.adapter("memory")
        assert isinstance(channel, MemoryChannel)
        await say(bot, channel, "hi")
        checklist(bot, CHECKLIST)
        assert await run_due(bot) == 1
    clock.advance(600)  # still the same half hour

    async with opened(beating, clock) as again:
        calls = len(scripted.requests)
        assert await run_due(again) == 0
        assert len(scripted.requests) == calls


def test_an_agents_file_sets_its_heartbeat_interval(tmp_path: Path) -> None:
    path = tmp_path / "butler.toml"
    path.write_text('agent_id = "butler"\nname = "Butler"\nheartbeat_interval = 1800\n')

    assert read_agent_file(path).spec.heartbeat_interval == 1800
