"""Every call counted (issue 30): each model, embedding, transcription and speech call writes
one row of the usage ledger; /usage, /status and `clawbot usage` add the rows up exactly."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from clawbot.app import Clawbot
from clawbot.cli.main import app
from clawbot.memory.embeddings import LitellmEmbedder
from clawbot.providers import litellm_module
from clawbot.runtime.usage import UsageFilter, UsageGrouping, UsageRecord, UsageTotals
from clawbot.settings import Settings
from clawbot.testing import (
    MemoryChannel,
    ModelRequest,
    ScriptedFailure,
    ScriptedModel,
    ScriptedUsage,
    Step,
    call,
)

from .conftest import Chat, parent_key
from .media_files import OGG_VOICE
from .standins.openai_api import OpenAIStandin

runner = CliRunner()


@pytest.fixture(autouse=True)
def forget_cli_log_handlers() -> Iterator[None]:
    """The CLI logs to the stderr it was given; CliRunner's capture is gone after a test."""
    yield
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_clawbot", False):
            root.removeHandler(handler)


async def shell(args: list[str], bot: Clawbot) -> Result:
    """`clawbot ...` beside the open bot (its own thread: the CLI runs its own event loop)."""
    return await asyncio.to_thread(runner.invoke, app, [*args, "--home", str(bot.settings.home)])


async def rows(bot: Clawbot) -> list[UsageRecord]:
    return await bot.store.usage.rows(UsageFilter())


def added(records: list[UsageRecord]) -> UsageTotals:
    totals = UsageTotals()
    for record in records:
        totals = totals.plus(record)
    return totals


# the rows ------------------------------------------------------------------------------


async def test_each_model_call_of_a_turn_writes_a_row_with_its_tokens_cost_and_who_made_it(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel, channel: MemoryChannel
) -> None:
    scripted.usage = ScriptedUsage(
        prompt_tokens=120, completion_tokens=30, cached_tokens=100, cost_usd=0.0015
    )
    scripted.add(call("list_dir", path="."), "Nothing much here.")

    handled = await chat.say("what is in my folder?")

    assert handled.turn is not None
    first, second = await rows(bot)
    assert first.purpose == second.purpose == "turn"
    assert first.session_key == first.root_key == parent_key(channel)
    assert first.agent_id == "main" and first.chain == "main"
    assert first.turn_id == second.turn_id == handled.turn.turn_id
    assert (first.model, first.provider, first.outcome) == ("scripted/test", "scripted", "ok")
    assert (first.input_tokens, first.cached_tokens, first.output_tokens) == (120, 100, 30)
    assert first.cost_nanousd == 1_500_000 and first.cost_usd == 0.0015
    assert first.latency_ms >= 0


async def test_a_model_without_a_price_is_stored_as_unknown_never_as_zero(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.usage = ScriptedUsage(prompt_tokens=10, completion_tokens=5)  # no cost: unpriced

    await chat.say("hello")

    (row,) = await rows(bot)
    assert row.cost_nanousd is None and row.cost_usd is None
    totals = await bot.store.usage.totals(UsageFilter())
    assert totals.unpriced == 1
    assert "1 without a known price" in totals.describe()


async def test_litellm_prices_a_known_model_from_its_offline_cost_map(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    standin = OpenAIStandin(["Hi there."])
    with standin.running():
        monkeypatch.setenv("OPENAI_API_BASE", standin.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        priced = settings.model_copy(update={"model": "openai/gpt-4o-mini", "streaming": False})
        async with await Clawbot.open(priced) as bot:
            bot.connect(MemoryChannel())
            await Chat(bot, bot.outbox.adapter("memory")).say("hello")  # type: ignore[arg-type]
            (row,) = await rows(bot)

    prompt, completion = litellm_module().cost_per_token(
        model="gpt-4o-mini", prompt_tokens=1, completion_tokens=1
    )
    assert row.provider == "openai" and row.model == "openai/gpt-4o-mini"
    assert (row.input_tokens, row.output_tokens) == (1, 1)
    assert row.cost_nanousd == round((prompt + completion) * 1_000_000_000) > 0


async def test_litellm_prices_a_known_models_streamed_call_from_its_offline_cost_map(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    standin = OpenAIStandin(["Hi there."])
    with standin.running():
        monkeypatch.setenv("OPENAI_API_BASE", standin.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        priced = settings.model_copy(update={"model": "openai/gpt-4o-mini", "streaming": True})
        async with await Clawbot.open(priced) as bot:
            bot.connect(MemoryChannel(live=True))
            await Chat(bot, bot.outbox.adapter("memory")).say("hello")  # type: ignore[arg-type]
            (row,) = await rows(bot)

    prompt, completion = litellm_module().cost_per_token(
        model="gpt-4o-mini", prompt_tokens=1, completion_tokens=1
    )
    assert standin.requests[0]["stream"] is True
    assert (row.input_tokens, row.output_tokens) == (1, 1)
    assert row.cost_nanousd == round((prompt + completion) * 1_000_000_000) > 0


async def test_a_failed_call_writes_a_row_naming_its_failure_with_nothing_made_up(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(ScriptedFailure("bad_request"))

    await chat.say("hello")

    (row,) = await rows(bot)
    assert row.outcome == "BadRequestError"
    assert (row.input_tokens, row.output_tokens, row.cost_nanousd) == (None, None, None)
    assert (await bot.store.usage.totals(UsageFilter())).failed == 1


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
async def test_malformed_usage_from_a_provider_is_stored_as_unknown_and_the_turn_goes_on(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.usage = ScriptedUsage(prompt_tokens="lots", completion_tokens=-3)

    handled = await chat.say("hello")

    assert handled.turn is not None and handled.turn.status == "done"
    (row,) = await rows(bot)
    assert (row.input_tokens, row.output_tokens, row.outcome) == (None, None, "ok")


async def test_a_compactions_own_tokens_are_counted_as_the_conversations_compaction(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel, channel: MemoryChannel
) -> None:
    scripted.usage = ScriptedUsage(prompt_tokens=50, completion_tokens=10, cost_usd=0.001)
    for text in ("one", "two", "three", "four", "five"):
        await chat.say(text)
    scripted.add("A summary.")

    handled = await chat.say("/compact")

    assert handled.reply is not None and "Compacted" in handled.reply
    summary = (await rows(bot))[-1]
    assert summary.purpose == "compaction"
    assert summary.session_key == summary.root_key == parent_key(channel)
    assert (summary.input_tokens, summary.cost_nanousd) == (50, 1_000_000)


async def test_a_subagents_calls_roll_up_to_its_root_conversation(
    workers: Clawbot,
    chat: Chat,
    scripted: ScriptedModel,
    worker: ScriptedModel,
    channel: MemoryChannel,
) -> None:
    scripted.usage = worker.usage = ScriptedUsage(10, 5, cost_usd=0.002)
    scripted.add(call("sessions_spawn", task="find it", agent="worker"), "Started.", "Done.")
    worker.add("Found it.")

    await chat.say("go")
    await workers.scheduler.wait_idle()

    records = await rows(workers)
    child = [r for r in records if r.agent_id == "worker"]
    assert len(child) == 1
    assert child[0].purpose == "subagent" and child[0].chain == "main>worker"
    assert child[0].session_key != parent_key(channel)
    assert {r.root_key for r in records} == {parent_key(channel)}
    rolled = await workers.store.usage.totals(UsageFilter(root_key=parent_key(channel)))
    assert rolled.calls == len(records) and rolled.cost_nanousd == 2_000_000 * len(records)


async def test_an_embedding_call_writes_a_row_with_its_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bot: Clawbot
) -> None:
    standin = OpenAIStandin()
    with standin.running():
        monkeypatch.setenv("OPENAI_API_BASE", standin.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        embedder = LitellmEmbedder("openai/text-embedding-3-small")
        embedder.meter = bot.runtime.client.meter
        await embedder.embed(["one text", "another"])

    (row,) = await rows(bot)
    assert (row.purpose, row.model, row.provider) == (
        "embedding",
        "openai/text-embedding-3-small",
        "openai",
    )
    assert row.input_tokens == 2 and row.session_key is None


async def test_a_transcription_and_a_spoken_reply_each_write_a_row_of_the_conversation(
    settings: Settings, scripted: ScriptedModel, channel_models: tuple[ScriptedModel, ScriptedModel]
) -> None:
    ears, voice = channel_models
    ears.hear("remind me to buy milk")
    speaking = settings.model_copy(
        update={"transcription_model": ears.model_string, "tts_model": voice.model_string}
    )
    async with await Clawbot.open(speaking) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        chat = Chat(bot, channel)
        await chat.say("/voice on")
        note = channel.attach("voice.ogg", OGG_VOICE, "audio/ogg", duration=3.0, voice=True)
        await bot.router.handle(channel.message("", attachments=(note,)))
        await bot.scheduler.wait_idle()
        records = await rows(bot)

    assert [(r.purpose, r.model) for r in records] == [
        ("transcription", "scripted/ears"),
        ("turn", "scripted/test"),
        ("speech", "scripted/voice"),
    ]
    assert {r.session_key for r in records} == {parent_key(channel)}
    assert records[0].turn_id == records[1].turn_id is not None


@pytest.fixture
def channel_models() -> Iterator[tuple[ScriptedModel, ScriptedModel]]:
    """A speech-to-text model and a speech model."""
    ears, voice = ScriptedModel(name="ears"), ScriptedModel(name="voice")
    with ears.installed(), voice.installed():
        yield ears, voice


# totals --------------------------------------------------------------------------------


async def test_totals_and_groups_add_up_exactly_to_the_rows(
    workers: Clawbot, chat: Chat, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    costs = iter([0.1, 0.2, 0.3, 0.000035, 1e-9, 0.7, 0.123456789, 0.05, 0.01, 0.3])

    def priced(model: ScriptedModel, text: str) -> str:
        model.usage = ScriptedUsage(17, 3, cost_usd=next(costs), cached_tokens=4)
        return text

    scripted.function = lambda request: priced(scripted, "ok")
    worker.function = lambda request: priced(worker, "found")
    scripted.usage = worker.usage = ScriptedUsage(17, 3, cost_usd=0.1, cached_tokens=4)
    await chat.say("one")
    await chat.say("two")
    scripted.function = None
    scripted.add(call("sessions_spawn", task="t", agent="worker"), "Started.", "Done.")
    await chat.say("spawn")
    await workers.scheduler.wait_idle()
    elsewhere = Chat(workers, chat.channel, chat_id="chat2")
    scripted.usage = ScriptedUsage(5, 1)  # unpriced
    await elsewhere.say("a model without a price")
    scripted.add(ScriptedFailure("bad_request"))
    await elsewhere.say("a call that fails")

    records = await rows(workers)
    total = await workers.store.usage.totals(UsageFilter())
    assert total == added(records)
    assert (total.unpriced, total.failed) == (1, 1)
    groupings: tuple[UsageGrouping, ...] = ("agent", "model", "session", "day", "purpose")
    for by in groupings:
        groups = await workers.store.usage.grouped(by, UsageFilter())
        assert sum(g.totals.cost_nanousd for g in groups) == total.cost_nanousd
        assert sum(g.totals.calls for g in groups) == total.calls
        assert sum(g.totals.input_tokens for g in groups) == total.input_tokens

    listed = await shell(["usage", "--by", "session", "--format", "csv"], workers)
    assert listed.exit_code == 0, listed.output
    lines = list(csv.DictReader(io.StringIO(listed.stdout)))
    *listed_groups, last = lines
    assert last["session"] == "total" and int(last["calls"]) == len(records)
    assert sum(int(g["calls"]) for g in listed_groups) == len(records)
    assert sum(int(g["output_tokens"]) for g in listed_groups) == int(last["output_tokens"])


async def test_clawbot_usage_prints_json_grouped_by_agent_with_the_total(
    workers: Clawbot, chat: Chat, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    scripted.usage = worker.usage = ScriptedUsage(10, 2, cost_usd=0.25)
    scripted.add(call("sessions_spawn", task="t", agent="worker"), "Started.", "Done.")
    await chat.say("spawn")
    await workers.scheduler.wait_idle()

    listed = await shell(["usage", "--by", "agent", "--format", "json"], workers)

    assert listed.exit_code == 0, listed.output
    document = json.loads(listed.stdout)
    by_agent = {group["agent"]: group for group in document["groups"]}
    assert set(by_agent) == {"main", "worker"}
    assert by_agent["worker"]["calls"] == 1 and by_agent["worker"]["cost_usd"] == 0.25
    assert document["total"]["calls"] == len(await rows(workers))
    assert document["total"]["cost_usd"] == 0.25 * document["total"]["calls"]


async def test_clawbot_usage_since_leaves_out_older_calls(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    await chat.say("hello")
    (row,) = await rows(bot)
    later = (row.at + timedelta(hours=1)).isoformat()

    listed = await shell(["usage", "--since", later, "--format", "json"], bot)
    everything = await shell(["usage", "--since", "7d", "--format", "json"], bot)

    assert json.loads(listed.stdout)["total"]["calls"] == 0
    assert json.loads(everything.stdout)["total"]["calls"] == 1


async def test_clawbot_usage_refuses_an_unknown_grouping_naming_the_choices(bot: Clawbot) -> None:
    listed = await shell(["usage", "--by", "colour"], bot)

    assert listed.exit_code == 2
    assert "agent, model, session, day, purpose" in listed.output


# in the chat ---------------------------------------------------------------------------


async def test_usage_command_shows_what_this_conversation_spent_today(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.usage = ScriptedUsage(1000, 200, cost_usd=0.0125)
    await chat.say("hello")
    await chat.say("again")
    await Chat(bot, chat.channel, chat_id="other").say("not mine")

    handled = await chat.say("/usage")

    assert handled.reply is not None
    assert handled.reply.startswith("This conversation today (UTC): $0.025 in 2 calls")
    assert "2,000 tokens in" in handled.reply and "400 out" in handled.reply
    assert "By model: scripted/test" in handled.reply


async def test_usage_command_refuses_an_unknown_period_saying_which_there_are(
    chat: Chat,
) -> None:
    handled = await chat.say("/usage fortnight")

    assert handled.reply is not None
    assert "/usage today, /usage week" in handled.reply


async def test_status_shows_the_conversations_running_cost(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.usage = ScriptedUsage(10, 2, cost_usd=0.5)
    await chat.say("hello")

    handled = await chat.say("/status")

    assert handled.reply is not None
    assert "Cost so far (subagents included): $0.50 in 1 call" in handled.reply


async def test_a_call_retried_after_a_429_is_a_row_per_attempt(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(ScriptedFailure("rate_limit"), "Answered.")

    handled = await chat.say("hello")

    assert handled.turn is not None and handled.turn.reply == "Answered."
    assert [r.outcome for r in await rows(bot)] == ["RateLimitError", "ok"]


async def test_a_call_that_falls_back_counts_the_model_that_answered(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    backup = ScriptedModel(name="backup", usage=ScriptedUsage(10, 2, cost_usd=0.003))
    scripted.outage = ScriptedFailure("auth")  # no retry can mend it: straight to the backup
    settings = Settings(
        home=tmp_path / "home",
        model=scripted.model_string,
        fallback_models=backup.model_string,  # type: ignore[arg-type]
        retry_backoff=0,
        _env_file=None,  # type: ignore[call-arg]
    )
    with backup.installed():
        async with await Clawbot.open(settings) as bot:
            bot.connect(MemoryChannel())
            await Chat(bot, bot.outbox.adapter("memory")).say("hi")  # type: ignore[arg-type]
            records = await rows(bot)

    assert [(r.model, r.outcome) for r in records] == [
        ("scripted/test", "AuthenticationError"),
        ("scripted/backup", "ok"),
    ]
    assert records[1].cost_nanousd == 3_000_000


async def test_a_multi_agent_run_with_compaction_adds_up_to_what_the_provider_reported(
    workers: Clawbot, chat: Chat, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    reported = {"input": 0, "output": 0, "nanos": 0, "calls": 0}
    sizes = iter(range(1, 1000))

    def report(model: ScriptedModel) -> None:
        """Each call reports its own usage, as a provider does; the test adds them up."""
        size = next(sizes)
        cost = size * 0.0001234
        model.usage = ScriptedUsage(100 * size, 7 * size, cost_usd=cost)
        reported["input"] += 100 * size
        reported["output"] += 7 * size
        reported["nanos"] += round(cost * 1_000_000_000)
        reported["calls"] += 1

    def parent(request: ModelRequest) -> Step:
        report(scripted)
        if request.last_user_text == "delegate" and not request.tool_results:
            return call("sessions_spawn", task="look it up", agent="worker")
        return "A summary." if "compact a conversation" in request.system else "ok"

    def child(request: ModelRequest) -> Step:
        report(worker)
        return call("list_dir", path=".") if not request.tool_results else "found"

    scripted.function, worker.function = parent, child
    for text in ("one", "two", "three", "four", "five", "delegate"):
        await chat.say(text)
    await workers.scheduler.wait_idle()
    compacted = await chat.say("/compact")

    assert compacted.reply is not None and "Compacted" in compacted.reply
    total = await workers.store.usage.totals(UsageFilter())
    purposes = {g.key for g in await workers.store.usage.grouped("purpose", UsageFilter())}
    assert purposes == {"turn", "subagent", "compaction"}
    assert (total.calls, total.input_tokens, total.output_tokens, total.cost_nanousd) == (
        reported["calls"],
        reported["input"],
        reported["output"],
        reported["nanos"],
    )
