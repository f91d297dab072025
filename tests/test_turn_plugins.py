"""Features take part in a turn as plugins (``clawbot.runtime.plugins``): they add tools,
ephemeral context and hooks around a turn or a tool call, and the runtime names none of them."""

from __future__ import annotations

import ast
import inspect
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

import clawbot.runtime.turn
from clawbot.app import Clawbot
from clawbot.messages import ToolCallBlock, ToolResultBlock
from clawbot.routing.sessions import Session
from clawbot.runtime.plugins import ModelCallNext, ToolCallNext, TurnPlugin, TurnPlugins, TurnStart
from clawbot.runtime.replies import ModelReply
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ScriptedFailure, ScriptedModel, call
from clawbot.tools.registry import Tool, make_tool

from .conftest import Chat


async def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"sunny in {city}"


class Recorder(TurnPlugin):
    """Adds a tool and a context block, and writes down every hook it hears."""

    name = "recorder"

    def __init__(self) -> None:
        self.heard: list[str] = []

    def tools(self) -> Sequence[Tool]:
        return [make_tool(weather)]

    async def context(self, turn: TurnStart) -> list[str]:
        return [f"[Context: recorder]\nthe person wrote {turn.message()!r}\n[/Context]"]

    async def turn_started(self, turn: TurnStart) -> None:
        self.heard.append("started")

    async def round_ended(self, turn: TurnStart) -> None:
        self.heard.append("round")

    async def turn_ended(self, turn: TurnStart) -> None:
        self.heard.append("ended")

    async def around_tool(
        self, call: ToolCallBlock, turn: TurnStart, proceed: ToolCallNext
    ) -> ToolResultBlock:
        self.heard.append(f"before {call.name}")
        result = await proceed()
        self.heard.append(f"after {call.name}")
        return result


class Refuser(TurnPlugin):
    """Answers every ``weather`` call itself instead of running it."""

    name = "refuser"

    async def around_tool(
        self, call: ToolCallBlock, turn: TurnStart, proceed: ToolCallNext
    ) -> ToolResultBlock:
        if call.name != "weather":
            return await proceed()
        return ToolResultBlock(
            tool_call_id=call.id, name=call.name, content="no forecasts today", is_error=True
        )


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
async def bot(settings: Settings, recorder: Recorder) -> AsyncIterator[Clawbot]:
    async with await Clawbot.open(settings, plugins=[recorder]) as opened:
        opened.connect(MemoryChannel())
        yield opened


async def test_a_plugins_tool_is_offered_to_the_model_and_runs(
    chat: Chat, scripted: ScriptedModel, channel: MemoryChannel
) -> None:
    scripted.add(call("weather", city="Oslo"), "It is sunny.")

    await chat.say("weather?")

    assert "weather" in scripted.requests[0].tool_names
    assert scripted.requests[1].tool_results == ["sunny in Oslo"]
    assert channel.texts == ["It is sunny."]


async def test_a_plugins_context_block_reaches_the_model_but_never_the_transcript(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add("ok")

    await chat.say("remember the milk")

    assert "the person wrote 'remember the milk'" in scripted.requests[0].system
    session = await bot.router.session_for(chat.channel.message("x", chat_id=chat.chat_id))
    stored = await bot.store.transcripts.load(session.key, session.epoch)
    assert [entry.role for entry in stored] == ["user", "assistant"]
    assert all("[Context: recorder]" not in str(entry.content) for entry in stored)


async def test_a_plugin_hears_the_turn_start_each_round_and_the_end_in_order(
    chat: Chat, scripted: ScriptedModel, recorder: Recorder
) -> None:
    scripted.add(call("weather", city="Oslo"), call("weather", city="Rome"), "done")

    await chat.say("two cities")

    assert recorder.heard == [
        "started",
        "before weather",
        "after weather",
        "round",
        "before weather",
        "after weather",
        "round",
        "ended",
    ]


async def test_a_plugin_hears_the_end_of_a_turn_that_failed(
    chat: Chat, scripted: ScriptedModel, recorder: Recorder, channel: MemoryChannel
) -> None:
    scripted.function = lambda request: ScriptedFailure("server_error")

    await chat.say("hi")

    assert recorder.heard == ["started", "ended"]
    assert "unavailable" in channel.texts[-1]


async def test_a_plugin_wrapping_a_tool_call_may_answer_it_itself_and_the_call_is_still_audited(
    settings: Settings, scripted: ScriptedModel
) -> None:
    async with await Clawbot.open(settings, plugins=[Recorder(), Refuser()]) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        scripted.add(call("weather", city="Oslo"), "No forecast.")

        await Chat(bot, channel).say("weather?")

        assert scripted.requests[1].tool_results == ["no forecasts today"]
        records = await bot.store.audit.all()
        assert [(r.tool, r.status) for r in records if r.tool == "weather"] == [
            ("weather", "error")
        ]


def test_two_plugins_of_one_name_are_refused() -> None:
    with pytest.raises(ValueError, match="recorder"):
        TurnPlugins([Recorder(), Recorder()])


class Lifecycle(TurnPlugin):
    name = "lifecycle"

    def __init__(self) -> None:
        self.heard: list[str] = []

    async def start(self) -> None:
        self.heard.append("start")

    async def stop(self) -> None:
        self.heard.append("stop")


async def test_a_plugin_is_started_when_the_bot_opens_and_stopped_when_it_closes(
    settings: Settings,
) -> None:
    lifecycle = Lifecycle()
    async with await Clawbot.open(settings, plugins=[lifecycle]):
        assert lifecycle.heard == ["start"]
    assert lifecycle.heard == ["start", "stop"]


class Rewriter(TurnPlugin):
    """Sees every model call of a turn and may change the reply."""

    name = "rewriter"

    def __init__(self) -> None:
        self.calls = 0

    async def around_model(self, turn: TurnStart, proceed: ModelCallNext) -> ModelReply:
        self.calls += 1
        reply = await proceed()
        return replace(reply, text=reply.text.upper())


async def test_a_plugin_wrapping_the_model_call_sees_each_call_and_may_change_the_reply(
    settings: Settings, scripted: ScriptedModel
) -> None:
    rewriter = Rewriter()
    async with await Clawbot.open(settings, plugins=[rewriter]) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        scripted.add(call("list_dir"), "all done")

        await Chat(bot, channel).say("look")

        assert rewriter.calls == 2
        assert channel.texts == ["ALL DONE"]


def test_the_runtime_imports_only_what_lies_below_it() -> None:
    """No module of clawbot/runtime/ imports a feature (memory, subagents, scheduling,
    commands, routing's behaviour) or what assembles the bot: features come in as plug-ins."""
    allowed = (
        "clawbot.messages",
        "clawbot.errors",
        "clawbot.settings",
        "clawbot.clock",
        "clawbot.lru",
        "clawbot.logs",
        "clawbot.providers",  # litellm's import
        "clawbot.routing.sessions",  # the Session record
        "clawbot.scheduling.jobs",  # the TurnJob record
        "clawbot.scheduling.backlog",  # the backlog record (below the store)
        "clawbot.subagents.records",  # what a child holds (below the store)
        "clawbot.store",
        "clawbot.agents",
        "clawbot.security",
        "clawbot.tools",
        "clawbot.channels",
        "clawbot.runtime",
    )
    runtime = Path(inspect.getfile(clawbot.runtime.turn)).parent
    reaching = []
    for path in sorted(runtime.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                if name.startswith("clawbot") and not name.startswith(allowed):
                    reaching.append(f"{path.name}: {name}")
    assert reaching == []


class ReplyWatcher(TurnPlugin):
    """Writes down what the chat held when it heard a reply went out; ``fail`` first."""

    def __init__(self, name: str, channel: MemoryChannel, *, fail: bool = False) -> None:
        self.name = name
        self.channel = channel
        self.fail = fail
        self.heard: list[tuple[str, list[str]]] = []

    async def reply_sent(self, session: Session, reply: str) -> None:
        self.heard.append((reply, list(self.channel.texts)))
        if self.fail:
            raise RuntimeError("the watcher broke")


async def test_a_plugin_hears_the_reply_once_it_reached_the_chat_and_a_failing_one_harms_nothing(
    settings: Settings, scripted: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    channel = MemoryChannel()
    broken, watcher = ReplyWatcher("broken", channel, fail=True), ReplyWatcher("watcher", channel)
    async with await Clawbot.open(settings, plugins=[broken, watcher]) as bot:
        bot.connect(channel)
        scripted.add("The answer.")

        await Chat(bot, channel).say("question")
        await bot.scheduler.wait_idle()
        jobs = await bot.store.jobs.for_session("memory:chat1")

    assert watcher.heard == [("The answer.", ["The answer."])]  # after the text went out
    assert broken.heard == watcher.heard
    assert [job.status for job in jobs] == ["done"]
    assert "plugin broken failed after the reply to memory:chat1" in caplog.text
