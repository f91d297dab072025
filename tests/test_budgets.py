"""Budgets that stop spending (issue 30): a model call a spent budget covers is refused
before it is made, with one message naming the budget and how to raise it; the chat is told
once at 80 %; the operator in the log and `clawbot doctor`; commands still work; the
subagents of a conversation whose budget is spent stop; an idle bot calls no model."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from clawbot.agents.profiles import AgentSpec
from clawbot.app import Clawbot
from clawbot.cli.checks import budget_check
from clawbot.clock import ManualClock
from clawbot.errors import ConfigError
from clawbot.runtime.usage import UsageFilter
from clawbot.settings import Settings, load_settings
from clawbot.settings.cost import Budget
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel, ScriptedUsage, call

from .conftest import Chat, add_agent, parent_key, until_idle

HEADS_UP = "Heads up:"
REFUSED = "The turn failed: this conversation's daily budget is spent"


def budgeted(settings: Settings, **fields: Any) -> Settings:
    """The test's settings with budgets, validated as an operator's would be."""
    return Settings(
        home=settings.home,
        model=settings.model,
        retry_backoff=0,
        _env_file=None,  # type: ignore[call-arg]
        **fields,
    )


@asynccontextmanager
async def opened(settings: Settings, clock: ManualClock | None = None) -> AsyncIterator[Chat]:
    async with await Clawbot.open(settings, clock=clock) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        yield Chat(bot, channel)


def priced(model: ScriptedModel, cost: float, tokens: int = 100) -> None:
    model.usage = ScriptedUsage(prompt_tokens=tokens - 10, completion_tokens=10, cost_usd=cost)


async def test_a_spent_conversation_budget_refuses_the_next_call_before_it_is_made(
    settings: Settings, scripted: ScriptedModel
) -> None:
    priced(scripted, 0.006)
    async with opened(budgeted(settings, budget_per_day="$0.01")) as chat:
        await chat.say("one")
        await chat.say("two")  # spends it: $0.012 of $0.01
        handled = await chat.say("three")

    assert len(scripted.requests) == 2  # the third call was never made
    assert handled.turn is not None and handled.turn.status == "failed"
    assert handled.turn.reply == (
        "The turn failed: this conversation's daily budget is spent ($0.01 of $0.01), so no"
        " model was called. To go on, raise CLAWBOT_BUDGET_PER_DAY and restart or wait for"
        " the next day (UTC); commands still work."
    )


async def test_at_80_percent_the_chat_is_told_once(
    settings: Settings, scripted: ScriptedModel
) -> None:
    priced(scripted, 0.009)
    async with opened(budgeted(settings, budget_per_day="$0.10")) as chat:
        for turn in range(8):
            await chat.say(f"message {turn}")  # 72 %
        assert not [text for text in chat.channel.texts if text.startswith(HEADS_UP)]
        await chat.say("the ninth")  # 81 %
        await chat.say("the tenth")  # 90 %
        await chat.say("the eleventh")  # 99 %

    assert [text for text in chat.channel.texts if text.startswith(HEADS_UP)] == [
        "Heads up: this conversation's daily budget is 81% spent ($0.08 of $0.10). When it is"
        " all spent, model calls stop until CLAWBOT_BUDGET_PER_DAY is raised, or wait for"
        " the next day (UTC)."
    ]


async def test_a_persons_commands_still_work_once_the_budget_is_spent(
    settings: Settings, scripted: ScriptedModel
) -> None:
    priced(scripted, 0.02)
    async with opened(budgeted(settings, budget_per_session="$0.01")) as chat:
        await chat.say("one")
        status = await chat.say("/status")
        usage = await chat.say("/usage session")

    assert status.reply is not None and "Cost so far (subagents included): $0.02" in status.reply
    assert usage.reply is not None and usage.reply.startswith("This conversation since it began")
    assert len(scripted.requests) == 1


async def test_the_bots_daily_cap_covers_every_conversation_until_the_next_utc_day(
    settings: Settings, scripted: ScriptedModel
) -> None:
    priced(scripted, 0.012)
    clock = ManualClock(datetime(2030, 1, 1, 20, 0, tzinfo=UTC))
    async with opened(budgeted(settings, daily_budget_usd=0.01), clock) as chat:
        await chat.say("spend it all")
        other = Chat(chat.bot, chat.channel, chat_id="another-chat")
        refused = await other.say("hello")
        clock.advance(5 * 3600)  # 01:00 the next day
        allowed = await other.say("hello again")

    assert refused.turn is not None and "CLAWBOT_DAILY_BUDGET_USD" in refused.turn.reply
    assert allowed.turn is not None and allowed.turn.status == "done"
    assert len(scripted.requests) == 2


async def test_a_budget_survives_a_restart_read_from_the_ledger(
    settings: Settings, scripted: ScriptedModel
) -> None:
    priced(scripted, 0.02)
    limited = budgeted(settings, budget_per_session="$0.01")
    async with opened(limited) as chat:
        await chat.say("one")
    async with opened(limited) as chat:
        handled = await chat.say("two")

    assert handled.turn is not None and "CLAWBOT_BUDGET_PER_SESSION" in handled.turn.reply
    assert len(scripted.requests) == 1


async def test_a_token_budget_per_turn_stops_a_runaway_tool_loop(
    settings: Settings, scripted: ScriptedModel
) -> None:
    priced(scripted, 0.0, tokens=100)
    scripted.function = lambda request: call("list_dir", path=f"./{len(request.tool_results)}")
    async with opened(budgeted(settings, budget_per_turn="250 tokens")) as chat:
        handled = await chat.say("loop")
        scripted.function = None
        again = await chat.say("a new turn")

    assert handled.turn is not None and handled.turn.status == "failed"
    assert "the budget of one turn is spent (300 tokens of 250 tokens)" in handled.turn.reply
    assert "CLAWBOT_BUDGET_PER_TURN" in handled.turn.reply
    assert again.turn is not None and again.turn.status == "done"
    assert len(scripted.requests) == 4  # three calls of the loop, one of the new turn


async def test_an_agents_own_daily_budget_covers_its_calls_and_no_one_elses(
    workers: Clawbot, chat: Chat, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    spec = workers.agents.get("worker")
    limited = {**spec.model_dump(), "budget": {"per_day": "$0.001"}}
    await workers.agents.update(AgentSpec.model_validate(limited))
    priced(worker, 0.002)
    scripted.add(
        call("sessions_spawn", task="first", agent="worker"),
        "Started one.",
        "One done.",
        call("sessions_spawn", task="second", agent="worker"),
        "Started two.",
        "Two done.",
    )
    await chat.say("spawn one")
    await workers.scheduler.wait_idle()
    await chat.say("spawn another")
    await workers.scheduler.wait_idle()

    assert len(worker.requests) == 1
    refused = [r for r in await workers.store.usage.rows(UsageFilter()) if r.agent_id == "main"]
    assert all(r.outcome == "ok" for r in refused)  # main's calls went on


async def test_budgets_stop_a_fan_out_of_children(
    settings: Settings, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    priced(worker, 0.001)
    worker.function = lambda request: call("list_dir", path=f"./{len(request.tool_results)}")

    def parent(request: ModelRequest) -> Any:
        if request.last_user_text == "fan out":
            return [call("sessions_spawn", task=f"task {n}", agent="worker") for n in range(5)]
        return "ok"

    scripted.function = parent
    async with opened(budgeted(settings, budget_per_day="$0.01")) as chat:
        await add_agent(chat.bot, "worker", model=worker.model_string)
        await chat.say("fan out")
        await chat.bot.scheduler.wait_idle()
        spent = await chat.bot.store.usage.totals(
            UsageFilter(root_key=parent_key(chat.channel), agent_id="worker")
        )
        children = await chat.bot.store.sessions.children(parent_key(chat.channel))

    # unchecked, five children of 8 tool rounds each would make 45 calls
    assert spent.calls == len(worker.requests) <= 15
    assert spent.cost_usd >= 0.01
    assert len(children) == 5


async def test_a_chat_is_told_once_not_again_for_each_subagent_reporting_back(
    settings: Settings, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    priced(worker, 0.004)
    scripted.function = lambda request: (
        [call("sessions_spawn", task=f"task {n}", agent="worker") for n in range(5)]
        if request.last_user_text == "fan out"
        else "ok"
    )
    async with opened(budgeted(settings, budget_per_day="$0.01")) as chat:
        await add_agent(chat.bot, "worker", model=worker.model_string)
        await chat.say("fan out")
        await chat.bot.scheduler.wait_idle()
        reports = [
            job
            for job in await chat.bot.store.jobs.for_session(parent_key(chat.channel))
            if job.lane == "announce"
        ]
        asked = await chat.say("and now?")

    refusals = [text for text in chat.channel.texts if text.startswith(REFUSED)]
    assert len(reports) >= 2 and all(job.status == "failed" for job in reports)
    assert len(refusals) == 2  # once for the reports, once for the person's own message
    assert asked.turn is not None and asked.turn.reply == refusals[-1]


async def test_a_schedule_refused_by_a_spent_budget_tells_its_chat_once(
    settings: Settings, scripted: ScriptedModel
) -> None:
    priced(scripted, 0.02)
    clock = ManualClock(datetime(2030, 1, 1, 8, 0, tzinfo=UTC))
    async with opened(budgeted(settings, budget_per_day="$0.01"), clock) as chat:
        await chat.bot.start()
        await chat.bot.schedules.stop()  # the test fires the due runs itself
        await chat.say("spend it all")
        await chat.say("/schedule add every 1 hour | check the server")
        for _ in range(2):
            clock.advance(3600)
            assert await chat.bot.schedules.tick() == 1
            await chat.bot.scheduler.wait_idle()
        runs = [
            j for j in await chat.bot.store.jobs.for_session("memory:chat1") if j.lane == "cron"
        ]

    refusals = [text for text in chat.channel.texts if text.startswith(REFUSED)]
    assert [job.status for job in runs] == ["failed", "failed"]
    assert len(refusals) == 1
    assert len(scripted.requests) == 1


async def test_a_schedule_refused_by_a_spent_budget_is_not_paused_and_runs_the_next_day(
    settings: Settings, scripted: ScriptedModel
) -> None:
    priced(scripted, 0.02)
    clock = ManualClock(datetime(2030, 1, 1, 8, 0, tzinfo=UTC))
    async with opened(budgeted(settings, budget_per_day="$0.01"), clock) as chat:
        await chat.bot.start()
        await chat.bot.schedules.stop()  # the test fires the due runs itself
        await chat.say("spend it all")
        await chat.say("/schedule add every 4 hours | check the server")
        for _ in range(settings.schedule_failures_to_pause):  # 12:00, 16:00, 20:00
            clock.advance(4 * 3600)
            await chat.bot.schedules.tick()
            await chat.bot.scheduler.wait_idle()
            await chat.bot.schedules.counted()
        (task,) = await chat.bot.store.schedules.live()
        scripted.add("The server is fine.")
        clock.advance(4 * 3600)  # 00:00 the next day
        await chat.bot.schedules.tick()
        await chat.bot.scheduler.wait_idle()

    assert (task.status, task.failures) == ("active", 0)
    assert chat.channel.texts[-1] == "The server is fine."
    assert not any("is paused" in text for text in chat.channel.texts)


async def test_the_operator_is_told_in_the_log_when_a_budget_is_spent(
    settings: Settings, scripted: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    priced(scripted, 0.02)
    with caplog.at_level(logging.WARNING, logger="clawbot.budgets"):
        async with opened(budgeted(settings, daily_budget_usd=0.01)) as chat:
            await chat.say("one")
            await chat.say("two")

    spent = [r.getMessage() for r in caplog.records if r.name == "clawbot.budgets"]
    assert spent == [
        "the bot's daily budget (CLAWBOT_DAILY_BUDGET_USD) is spent: $0.02 of $0.01;"
        " model calls it covers are refused"
    ]


async def test_doctor_reports_a_spent_daily_budget_as_a_problem_saying_what_to_raise(
    settings: Settings, scripted: ScriptedModel
) -> None:
    priced(scripted, 0.02)
    limited = budgeted(settings, daily_budget_usd=0.01)
    before = await budget_check(limited)
    async with opened(limited) as chat:
        await chat.say("one")
    after = await budget_check(limited)

    assert before.status == "ok"
    assert after.status == "problem"
    assert after.line.startswith("problem  budgets: today's 1 call spent $0.020 of $0.01")
    assert "raise CLAWBOT_DAILY_BUDGET_USD" in after.line


async def test_a_bot_idle_for_a_simulated_day_calls_no_model(
    settings: Settings, scripted: ScriptedModel
) -> None:
    clock = ManualClock(datetime(2030, 1, 1, tzinfo=UTC))
    async with opened(settings, clock) as chat:
        await chat.bot.start()
        for _ in range(24 * 60):
            clock.advance(60)
            await chat.bot.scheduler.tick()
        calls = await chat.bot.store.usage.totals(UsageFilter())

    assert scripted.requests == []
    assert calls.calls == 0


# bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "amount", "unit"),
    [
        ("$5", 5.0, "usd"),
        ("2.50 usd", 2.5, "usd"),
        ("0,75", 0.75, "usd"),
        ("200000 tokens", 200_000, "tokens"),
        ("200k tokens", 200_000, "tokens"),
        ("2M tokens", 2_000_000, "tokens"),
    ],
)
def test_a_budget_reads_as_a_person_writes_it(written: str, amount: float, unit: str) -> None:
    assert Budget.model_validate(written) == Budget(amount=amount, unit=unit)  # type: ignore[arg-type]


def test_a_budget_setting_that_does_not_parse_is_refused_at_start_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLAWBOT_BUDGET_PER_DAY", "five bucks")

    with pytest.raises(ConfigError) as refused:
        load_settings()

    assert "CLAWBOT_BUDGET_PER_DAY" in refused.value.message
    assert "'five bucks' is not a budget such as $5" in refused.value.message


@pytest.mark.parametrize("written", ["$5 tokens", "5k usd", "0 tokens", "-1"])
def test_a_budget_that_means_nothing_is_refused(written: str) -> None:
    with pytest.raises(ValueError):
        Budget.model_validate(written)


def test_an_agents_budget_that_does_not_parse_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="per_turn"):
        AgentSpec(agent_id="a", name="a", budget={"per_turn": "lots"})  # type: ignore[arg-type]


async def test_a_spent_conversation_budget_stops_its_running_subagents(
    settings: Settings, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    never = asyncio.Event()

    async def held(request: ModelRequest) -> str:
        await never.wait()  # a child busy for as long as no one stops it
        return "done"

    worker.function = held
    priced(scripted, 0.004)
    scripted.add(call("sessions_spawn", task="work", agent="worker"), "Started.", "More.")
    try:
        async with opened(budgeted(settings, budget_per_day="$0.01")) as chat:
            await add_agent(chat.bot, "worker", model=worker.model_string)
            await chat.say("go")  # $0.008: the child is held in its model call
            (child,) = await chat.bot.store.sessions.children(parent_key(chat.channel))
            running = chat.bot.scheduler.queue_state(child.key).active is not None
            await chat.say("more")  # $0.012: spent
            await until_idle(chat.bot, child.key)
    finally:
        never.set()

    assert running
    assert len(worker.requests) == 1
