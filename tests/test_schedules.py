"""Scheduled tasks: what a chat asks for runs in the cron lane at its time, once, with its
answer in the chat; with an injected clock, never a real wait."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from clawbot.app import Clawbot
from clawbot.clock import ManualClock
from clawbot.messages import Provenance, TextBlock, TranscriptEntry
from clawbot.schedules.records import due_key
from clawbot.schedules.when import Trigger, parse_when
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ScriptedFailure, ScriptedModel, call

START = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@contextlib.asynccontextmanager
async def opened(settings: Settings, clock: ManualClock) -> AsyncIterator[Clawbot]:
    """A started bot whose schedule loop is stopped: the test fires due tasks itself
    (``run_due``), at the times its clock says."""
    async with await Clawbot.open(settings, clock=clock) as bot:
        bot.connect(MemoryChannel())
        await bot.start()
        await bot.schedules.stop()
        yield bot


@pytest.fixture
async def bot(settings: Settings, clock: ManualClock) -> AsyncIterator[Clawbot]:
    async with opened(settings, clock) as bot:
        yield bot


@pytest.fixture
def channel(bot: Clawbot) -> MemoryChannel:
    adapter = bot.outbox.adapter("memory")
    assert isinstance(adapter, MemoryChannel)
    return adapter


async def say(bot: Clawbot, channel: MemoryChannel, text: str, chat_id: str = "chat1") -> str:
    handled = await bot.router.handle(channel.message(text, chat_id=chat_id))
    assert handled.reply is not None
    return handled.reply


async def run_due(bot: Clawbot) -> int:
    """Fire what is due now and let the turns end."""
    started = await bot.schedules.tick()
    await bot.scheduler.wait_idle()
    await bot.schedules.counted()
    return started


async def cron_jobs(bot: Clawbot, session_key: str = "memory:chat1") -> list[str]:
    return [j.id for j in await bot.store.jobs.for_session(session_key) if j.lane == "cron"]


async def test_a_task_added_in_chat_runs_its_prompt_at_its_time_and_answers_the_chat(
    bot: Clawbot, channel: MemoryChannel, clock: ManualClock, scripted: ScriptedModel
) -> None:
    reply = await say(bot, channel, "/schedule add in 20 minutes | remind me of the oven")
    assert reply.startswith("Scheduled sch_")
    scripted.add("The oven!")

    clock.advance(19 * 60)
    assert await run_due(bot) == 0
    clock.advance(60)
    assert await run_due(bot) == 1

    assert channel.chat("chat1")[-1] == "The oven!"
    assert "remind me of the oven" in scripted.requests[-1].last_user_text
    assert len(await cron_jobs(bot)) == 1
    assert await run_due(bot) == 0  # a one-off is done
    assert "No scheduled tasks" in await say(bot, channel, "/schedule list")


async def test_a_task_due_while_clawbot_was_down_runs_once_at_start(
    settings: Settings, clock: ManualClock, scripted: ScriptedModel
) -> None:
    async with opened(settings, clock) as first:
        await say(first, first_channel(first), "/schedule add every 1 hour | the news")
    clock.advance(5 * 3600 + 60)  # five due times missed

    async with opened(settings, clock) as second:
        assert await run_due(second) == 1
        assert await run_due(second) == 0
        (task,) = await second.store.schedules.live()
        assert task.next_run == START + timedelta(hours=6)  # the next time still ahead
        assert len(await cron_jobs(second)) == 1


def first_channel(bot: Clawbot) -> MemoryChannel:
    adapter = bot.outbox.adapter("memory")
    assert isinstance(adapter, MemoryChannel)
    return adapter


async def test_two_tasks_due_at_once_both_run_once(
    bot: Clawbot, channel: MemoryChannel, clock: ManualClock, scripted: ScriptedModel
) -> None:
    await say(bot, channel, "/schedule add in 5 minutes | first", chat_id="chat1")
    await say(bot, channel, "/schedule add in 5 minutes | second", chat_id="chat2")
    scripted.function = lambda request: f"done: {request.last_user_text.splitlines()[-1]}"
    clock.advance(300)

    assert await run_due(bot) == 2

    assert channel.chat("chat1")[-1] == "done: first"
    assert channel.chat("chat2")[-1] == "done: second"
    assert len(await cron_jobs(bot, "memory:chat1")) == 1
    assert len(await cron_jobs(bot, "memory:chat2")) == 1


async def test_a_due_time_claimed_before_a_crash_is_not_run_again(
    bot: Clawbot, channel: MemoryChannel, clock: ManualClock
) -> None:
    """A process stored the run's job (with its claim) and died before moving the task on:
    the task is still due at that time, and the claim refuses a second job."""
    await say(bot, channel, "/schedule add every 1 hour | the news")
    (task,) = await bot.store.schedules.live()
    assert task.next_run is not None
    session = await bot.store.sessions.get(task.session_key)
    assert session is not None
    entry = TranscriptEntry(
        role="user", content=(TextBlock(text=task.prompt),), provenance=Provenance(source="system")
    )
    claimed = await bot.scheduler.submit(
        session, entry, lane="cron", dedup_id=due_key(task.id, task.next_run)
    )
    assert claimed is not None
    await bot.scheduler.wait_idle()
    clock.advance(3600)

    assert await run_due(bot) == 0
    assert len(await cron_jobs(bot)) == 1
    (moved,) = await bot.store.schedules.live()
    assert moved.next_run == task.next_run + timedelta(hours=1)


async def test_a_task_whose_runs_keep_failing_is_paused_and_the_chat_told(
    bot: Clawbot, channel: MemoryChannel, clock: ManualClock, scripted: ScriptedModel
) -> None:
    await say(bot, channel, "/schedule add every 1 hour | check the server")
    scripted.function = lambda request: ScriptedFailure("bad_request")
    for _ in range(bot.settings.schedule_failures_to_pause):
        clock.advance(3600)
        assert await run_due(bot) == 1

    (task,) = await bot.store.schedules.live()
    assert task.status == "paused"
    assert any(f"{task.id}" in text and "is paused" in text for text in channel.chat("chat1"))
    clock.advance(3600)
    assert await run_due(bot) == 0
    assert "paused after 3 failed runs" in await say(bot, channel, "/schedule list")


async def test_a_success_between_failures_starts_the_count_again(
    bot: Clawbot, channel: MemoryChannel, clock: ManualClock, scripted: ScriptedModel
) -> None:
    await say(bot, channel, "/schedule add every 1 hour | check the server")
    scripted.add(ScriptedFailure("bad_request"), ScriptedFailure("bad_request"), "fine")
    scripted.add(ScriptedFailure("bad_request"), ScriptedFailure("bad_request"))
    for _ in range(5):
        clock.advance(3600)
        await run_due(bot)

    (task,) = await bot.store.schedules.live()
    assert (task.status, task.failures) == ("active", 2)


def test_a_cron_expression_keeps_its_local_time_across_daylight_saving() -> None:
    trigger = parse_when("cron 0 8 * * *", now=START, tz="Europe/Berlin")
    winter = trigger.first_run(datetime(2030, 1, 10, 12, tzinfo=UTC))
    summer = trigger.first_run(datetime(2030, 7, 10, 12, tzinfo=UTC))
    assert (winter.hour, summer.hour) == (7, 6)  # 8:00 in Berlin, CET and CEST


def test_an_interval_missed_many_times_moves_to_the_next_time_ahead() -> None:
    trigger = Trigger("interval", "3600")
    due = START
    assert trigger.next_after(due, START + timedelta(hours=5, minutes=1)) == START + timedelta(
        hours=6
    )


@pytest.mark.parametrize(
    ("when", "said"),
    [
        ("cron 61 8 * * *", "is not a valid cron expression — five fields"),
        ("2029-12-31T09:00", "is in the past"),
        ("every 5 seconds", "repeats too often"),
        ("next blue moon", "is not a time clawbot can read — e.g. 'in 20 minutes'"),
        ("cron 0 8 * * * tz Mars/Olympus", "'Mars/Olympus' is not a time zone"),
    ],
)
async def test_a_time_that_cannot_be_scheduled_gets_a_clear_message_with_an_example(
    bot: Clawbot, channel: MemoryChannel, when: str, said: str
) -> None:
    reply = await say(bot, channel, f"/schedule add {when} | the news")
    assert reply.startswith("Could not do that:")
    assert said in reply
    assert "e.g." in reply
    assert await bot.store.schedules.live() == []


async def test_a_chat_holds_at_most_the_cap_of_tasks(
    settings: Settings, clock: ManualClock, scripted: ScriptedModel
) -> None:
    capped = settings.model_copy(update={"schedules_per_session": 2})
    async with opened(capped, clock) as bot:
        channel = first_channel(bot)
        for n in range(2):
            assert (await say(bot, channel, f"/schedule add in {n + 1} hours | x")).startswith(
                "Scheduled"
            )
        refused = await say(bot, channel, "/schedule add in 3 hours | x")
        assert "already has 2 scheduled tasks (the limit)" in refused
        assert len(await bot.store.schedules.live()) == 2


async def test_a_chat_sees_and_cancels_only_its_own_tasks(
    bot: Clawbot, channel: MemoryChannel
) -> None:
    await say(bot, channel, "/schedule add in 1 hour | mine", chat_id="chat1")
    (task,) = await bot.store.schedules.live()

    assert "No scheduled tasks" in await say(bot, channel, "/schedule list", chat_id="chat2")
    refused = await say(bot, channel, f"/schedule cancel {task.id}", chat_id="chat2")
    assert f"no scheduled task '{task.id}' in this conversation" in refused
    assert task.id in await say(bot, channel, "/schedule list", chat_id="chat1")
    assert "Cancelled" in await say(bot, channel, f"/schedule cancel {task.id}", chat_id="chat1")
    assert await bot.store.schedules.live() == []


async def test_the_model_creates_lists_and_cancels_tasks_with_audited_tools(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    scripted.add(
        call("schedule_create", when="every 2 hours", prompt="water the plants"),
        call("schedule_list"),
        "Done.",
    )
    await say(bot, channel, "water the plants every two hours")
    (task,) = await bot.store.schedules.live()
    assert (task.kind, task.spec, task.prompt) == ("interval", "7200", "water the plants")
    assert task.id in scripted.requests[2].tool_results[-1]

    scripted.add(call("schedule_cancel", task_id=task.id), "Cancelled.")
    await say(bot, channel, "stop watering")
    assert await bot.store.schedules.live() == []
    audited = [record.tool for record in await bot.store.audit.all()]
    assert audited.count("schedule_create") == 1 and audited.count("schedule_cancel") == 1


async def test_the_schedule_tools_are_not_offered_to_an_agent_whose_policy_denies_them(
    settings: Settings, clock: ManualClock, scripted: ScriptedModel
) -> None:
    from .conftest import add_agent

    async with opened(settings, clock) as bot:
        channel = first_channel(bot)
        await add_agent(bot, "quiet", tools={"deny": ["group:schedules"]})
        await say(bot, channel, "hello")
        assert "schedule_create" in scripted.requests[-1].tool_names
        await say(bot, channel, "/agent quiet")
        await say(bot, channel, "hello again")
        assert not {"schedule_create", "schedule_list", "schedule_cancel"} & set(
            scripted.requests[-1].tool_names
        )


async def test_a_task_run_in_a_subagent_reports_back_through_the_chats_agent(
    bot: Clawbot, channel: MemoryChannel, clock: ManualClock, scripted: ScriptedModel
) -> None:
    reply = await say(bot, channel, "/schedule add subagent every 1 day | look for new papers")
    assert "in a subagent" in reply or reply.startswith("Scheduled")
    scripted.add("Found 3 new papers.", "Your daily search found 3 new papers.")
    clock.advance(86400)

    assert await run_due(bot) == 1

    assert channel.chat("chat1")[-1] == "Your daily search found 3 new papers."
    assert "Found 3 new papers." not in channel.chat("chat1")  # the child's own words stay inside
    (child,) = await bot.store.sessions.children("memory:chat1")
    assert [j.lane for j in await bot.store.jobs.for_session(child.key)] == ["subagent"]
    assert "look for new papers" in scripted.requests[-2].last_user_text
    assert await cron_jobs(bot) == []


async def test_creating_and_cancelling_ask_for_an_approval_and_listing_does_not(
    bot: Clawbot,
) -> None:
    risks = {}
    for name in ("schedule_create", "schedule_list", "schedule_cancel"):
        tool = bot.tools.get(name)
        assert tool is not None
        risks[name] = tool.risk
    assert risks == {
        "schedule_create": "guarded",
        "schedule_list": "safe",
        "schedule_cancel": "guarded",
    }
