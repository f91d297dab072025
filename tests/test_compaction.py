"""Compaction: ``/compact`` summarizes the older part of a conversation, the originals stay
stored and marked; a conversation nearing the model's window is compacted before the call;
a provider's context-length error compacts and retries once."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from clawbot.app import Clawbot
from clawbot.cli.main import app
from clawbot.runtime.compaction import SUMMARY_PROMPT, ContextMeter, request_chars
from clawbot.settings import Settings
from clawbot.store.records import COMPACTED_META
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedFailure, ScriptedModel, Step, call

from .conftest import Chat, add_agent, parent_key


def is_summary(request: ModelRequest) -> bool:
    return SUMMARY_PROMPT in request.system


def turns(model: ScriptedModel) -> list[ModelRequest]:
    """The requests of turns, without the summarizing ones."""
    return [r for r in model.requests if not is_summary(r)]


def users(request: ModelRequest) -> list[str]:
    return [str(m["content"]) for m in request.messages if m["role"] == "user"]


@pytest.fixture
async def kept_two(settings: Settings) -> AsyncIterator[Clawbot]:
    """A bot whose compactions keep the last two turns."""
    async with await Clawbot.open(
        settings.model_copy(update={"compaction_keep_turns": 2})
    ) as opened:
        opened.connect(MemoryChannel())
        yield opened


async def talk(chat: Chat, *texts: str) -> None:
    for text in texts:
        handled = await chat.say(text)
        assert handled.turn is not None and handled.turn.status == "done"


async def test_compact_puts_a_summary_in_place_of_the_older_turns_and_keeps_the_last_verbatim(
    kept_two: Clawbot, scripted: ScriptedModel
) -> None:
    chat = Chat(kept_two, kept_two.outbox.adapter("memory"))  # type: ignore[arg-type]
    await talk(chat, "my name is Ada", "I live in Lyon", "I like tea", "I have a cat")
    scripted.add("Ada lives in Lyon.")

    handled = await chat.say("/compact keep the person's name")
    await talk(chat, "what do you know?")

    assert handled.reply is not None and "Compacted 4 earlier messages" in handled.reply
    summarizing = scripted.requests[4]
    assert is_summary(summarizing)
    assert "keep the person's name" in summarizing.system
    assert "my name is Ada" in summarizing.messages[-1]["content"]
    assert "I like tea" not in summarizing.messages[-1]["content"]
    after = scripted.requests[-1]
    assert "Ada lives in Lyon." in after.system
    assert users(after) == ["I like tea", "I have a cat", "what do you know?"]


async def test_compacted_messages_stay_stored_and_are_marked(
    kept_two: Clawbot, scripted: ScriptedModel
) -> None:
    chat = Chat(kept_two, kept_two.outbox.adapter("memory"))  # type: ignore[arg-type]
    await talk(chat, "one", "two", "three")
    scripted.add("summary")

    await chat.say("/compact")

    stored = await kept_two.store.transcripts.load("memory:chat1", 0)
    assert [e.text for e in stored] == ["one", "ok", "two", "ok", "three", "ok"]
    assert [COMPACTED_META in e.meta for e in stored] == [True, True] + [False] * 4


async def test_a_failed_summary_leaves_the_conversation_as_it_was_with_one_message(
    kept_two: Clawbot, scripted: ScriptedModel
) -> None:
    chat = Chat(kept_two, kept_two.outbox.adapter("memory"))  # type: ignore[arg-type]
    await talk(chat, "one", "two", "three")
    scripted.add(ScriptedFailure("bad_request"))

    handled = await chat.say("/compact")
    await talk(chat, "four")

    assert handled.reply is not None
    assert handled.reply.startswith("Could not compact: the summary failed")
    assert handled.reply.endswith("The conversation is unchanged.")
    assert users(scripted.requests[-1]) == ["one", "two", "three", "four"]
    stored = await kept_two.store.transcripts.load("memory:chat1", 0)
    assert not any(COMPACTED_META in e.meta for e in stored)


async def test_two_compactions_at_once_summarize_each_turn_once(
    kept_two: Clawbot, scripted: ScriptedModel
) -> None:
    await talk(
        Chat(kept_two, kept_two.outbox.adapter("memory")),  # type: ignore[arg-type]
        "one",
        "two",
        "three",
    )
    session = await kept_two.store.sessions.get("memory:chat1")
    assert session is not None
    compactor = kept_two.runtime.compactor
    scripted.add("summary")

    first, second = await asyncio.gather(
        compactor.compact(session, scripted.model_string),
        compactor.compact(session, scripted.model_string),
    )

    assert first is not None and first.messages == 2
    assert second is None
    assert len([r for r in scripted.requests if is_summary(r)]) == 1


async def test_compact_with_no_more_turns_than_it_keeps_says_there_is_nothing_to_compact(
    kept_two: Clawbot, scripted: ScriptedModel
) -> None:
    chat = Chat(kept_two, kept_two.outbox.adapter("memory"))  # type: ignore[arg-type]
    await talk(chat, "one", "two")

    handled = await chat.say("/compact")

    assert handled.reply is not None and handled.reply.startswith("Nothing to compact yet")
    assert len(scripted.requests) == 2


async def test_a_second_compaction_summarizes_the_first_summary_with_the_newer_turns(
    kept_two: Clawbot, scripted: ScriptedModel
) -> None:
    chat = Chat(kept_two, kept_two.outbox.adapter("memory"))  # type: ignore[arg-type]
    await talk(chat, "one", "two", "three")
    scripted.add("FIRST SUMMARY")
    await chat.say("/compact")
    await talk(chat, "four")
    scripted.add("SECOND SUMMARY")

    await chat.say("/compact")
    await talk(chat, "five")

    second = [r for r in scripted.requests if is_summary(r)][1]
    assert "FIRST SUMMARY" in second.messages[-1]["content"]
    assert "two" in second.messages[-1]["content"]
    last = scripted.requests[-1]
    assert "SECOND SUMMARY" in last.system and "FIRST SUMMARY" not in last.system
    assert users(last) == ["three", "four", "five"]


def summarizing(summary: str) -> Any:
    """A model function that answers summary requests with ``summary`` and turns with ok."""

    def respond(request: ModelRequest) -> Step:
        return summary if is_summary(request) else "ok"

    return respond


async def test_a_long_conversation_is_compacted_before_a_request_would_pass_the_threshold(
    settings: Settings, scripted: ScriptedModel
) -> None:
    small = settings.model_copy(
        update={
            "compaction_default_window": 10_000,
            "compaction_threshold": 0.8,
            "rate_limit_per_minute": 0,
        }
    )
    scripted.function = summarizing("the earlier talk, summarized")
    meter = ContextMeter(small)
    limit_chars = 8000 * 3  # an unknown model: 10,000 tokens at 80 %, three characters a token
    async with await Clawbot.open(small) as bot:
        chat = Chat(bot, MemoryChannel())
        bot.connect(chat.channel)
        for index in range(40):
            await talk(chat, f"message {index}: " + "words " * 200)

    assert any(is_summary(r) for r in scripted.requests)
    for request in turns(scripted):
        assert request_chars(request.messages) + meter._tools_chars(request.tools) < limit_chars
    assert "the earlier talk, summarized" in turns(scripted)[-1].system


async def test_a_prompt_and_tools_that_alone_pass_the_limit_do_not_compact_every_turn(
    settings: Settings, scripted: ScriptedModel
) -> None:
    tiny = settings.model_copy(update={"compaction_default_window": 1000})  # 2,400 chars
    scripted.function = summarizing("a summary")
    async with await Clawbot.open(tiny) as bot:
        chat = Chat(bot, MemoryChannel())
        bot.connect(chat.channel)
        await talk(chat, *(f"message {index}" for index in range(8)))

    assert not any(is_summary(r) for r in scripted.requests)
    assert len(scripted.requests) == 8


async def test_a_context_length_error_compacts_and_retries_the_call_once(
    kept_two: Clawbot, scripted: ScriptedModel
) -> None:
    chat = Chat(kept_two, kept_two.outbox.adapter("memory"))  # type: ignore[arg-type]
    await talk(chat, "one", "two", "three")
    scripted.add(ScriptedFailure("context_length"), "SUMMARY OF ONE AND TWO", "the answer")

    handled = await chat.say("four")

    assert handled.turn is not None and handled.turn.status == "done"
    assert handled.turn.reply == "the answer"
    failed, summary_request, retried = scripted.requests[3:]
    assert users(failed) == ["one", "two", "three", "four"]
    assert is_summary(summary_request) and "one" in summary_request.messages[-1]["content"]
    assert "SUMMARY OF ONE AND TWO" in retried.system
    assert users(retried) == ["three", "four"]
    stored = await kept_two.store.transcripts.load("memory:chat1", 0)
    assert [e.text for e in stored][-2:] == ["four", "the answer"]
    assert [COMPACTED_META in e.meta for e in stored] == [True] * 4 + [False] * 4


async def test_a_context_length_error_with_nothing_to_compact_fails_the_turn_saying_why(
    chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(ScriptedFailure("context_length"))

    handled = await chat.say("a very long first message")

    assert handled.turn is not None and handled.turn.status == "failed"
    assert "longer than the input window" in handled.turn.reply
    assert "/compact" in handled.turn.reply
    assert len(scripted.requests) == 1


async def test_a_known_models_window_comes_from_litellm_and_an_unknown_one_from_the_setting(
    settings: Settings,
) -> None:
    meter = ContextMeter(settings.model_copy(update={"compaction_default_window": 5000}))

    known = meter.window("gpt-4o-mini")
    unknown = meter.window("scripted/test")

    assert known.known and known.tokens == 128_000
    assert not unknown.known and unknown.tokens == 5000


async def test_a_known_models_tokens_are_counted_only_near_the_limit(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    import litellm

    counted: list[int] = []

    def count(**kwargs: Any) -> int:
        counted.append(1)
        return 200_000

    monkeypatch.setattr(litellm, "token_counter", count)
    meter = ContextMeter(settings)  # gpt-4o-mini: 128,000 tokens, 80 % is 102,400
    short = [{"role": "user", "content": "hi " * 1000}]
    long = [{"role": "user", "content": "hi " * 70_000}]

    assert not meter.over("gpt-4o-mini", short, ())
    assert counted == []
    assert meter.over("gpt-4o-mini", long, ())
    assert counted == [1]


async def test_sessions_history_marks_the_compacted_messages_of_a_child(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    bot = workers
    scripted.add(call("sessions_spawn", task="count to one", agent="worker"), "Started.")
    worker.add("one")
    await chat.say("go")
    await bot.scheduler.wait_idle()
    (child,) = await bot.store.sessions.children(parent_key(channel))
    child_id = child.key.rsplit("/", 1)[1]
    scripted.add(call("sessions_send", session=child_id, message="now two"), "Sent.")
    worker.add("two")
    await chat.say("continue it")
    await bot.scheduler.wait_idle()
    worker.add("counted to two")
    await bot.runtime.compactor.compact(child, worker.model_string, keep_turns=1)
    scripted.add(call("sessions_history", session=child_id), "Read it.")

    await chat.say("what did it do?")

    history = scripted.requests[-1].tool_results[-1]
    assert "user (compacted): count to one" in history
    assert "assistant (compacted): one" in history
    assert "user: now two" in history


async def test_an_agents_own_model_writes_the_summary(
    bot: Clawbot, chat: Chat, worker: ScriptedModel, scripted: ScriptedModel
) -> None:
    await add_agent(bot, "worker", model=worker.model_string)
    await chat.say("/agent worker")
    for text in ("one", "two", "three", "four", "five"):
        await chat.say(text)
    worker.add("summary by the worker")

    await chat.say("/compact")

    assert is_summary(worker.requests[-1])
    assert not any(is_summary(r) for r in scripted.requests)


@pytest.fixture
def cli_logs() -> Iterator[None]:
    """The CLI logs to the stderr it was given; CliRunner's capture is gone after a test."""
    yield
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_clawbot", False):
            root.removeHandler(handler)


async def _compacted_chat(settings: Settings, scripted: ScriptedModel) -> None:
    async with await Clawbot.open(settings) as bot:
        chat = Chat(bot, MemoryChannel())
        bot.connect(chat.channel)
        await talk(chat, "first words", "second words")
        scripted.add("summary")
        await chat.say("/compact")


def test_clawbot_sessions_show_prints_the_compacted_messages_marked(
    settings: Settings, scripted: ScriptedModel, cli_logs: None
) -> None:
    asyncio.run(_compacted_chat(settings.model_copy(update={"compaction_keep_turns": 1}), scripted))

    shown = CliRunner().invoke(
        app, ["sessions", "show", "memory:chat1", "--home", str(settings.home)]
    )
    exported = CliRunner().invoke(
        app, ["sessions", "show", "memory:chat1", "--jsonl", "--home", str(settings.home)]
    )

    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines() == [
        "user (compacted): first words",
        "assistant (compacted): ok",
        "user: second words",
        "assistant: ok",
    ]
    rows = [json.loads(line) for line in exported.output.splitlines()]
    assert [COMPACTED_META in row["meta"] for row in rows] == [True, True, False, False]
