"""Memory stays bounded however many sessions a bot has seen: each per-session cache keeps
the ``session_cache_size`` most recently active sessions, and a session dropped from memory
carries on where it left off, read back from the store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from clawbot.app import Clawbot
from clawbot.messages import TextBlock, TranscriptEntry
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel, Step, call

from .conftest import Chat

CACHE_SIZE = 3


@pytest.fixture
def other() -> Iterator[ScriptedModel]:
    model = ScriptedModel(name="other")
    with model.installed():
        yield model


@pytest.fixture
async def small_bot(tmp_path: Path, scripted: ScriptedModel) -> AsyncIterator[Clawbot]:
    settings = Settings(
        home=tmp_path / "home",
        model=scripted.model_string,
        session_cache_size=CACHE_SIZE,
        _env_file=None,  # type: ignore[call-arg]
    )
    async with await Clawbot.open(settings) as bot:
        bot.connect(MemoryChannel())
        yield bot


@pytest.fixture
def channel(small_bot: Clawbot) -> MemoryChannel:
    adapter = small_bot.outbox.adapter("memory")
    assert isinstance(adapter, MemoryChannel)
    return adapter


def chat(bot: Clawbot, channel: MemoryChannel, number: int) -> Chat:
    return Chat(bot, channel, chat_id=f"chat{number}")


async def talk_in_other_chats(bot: Clawbot, channel: MemoryChannel, count: int) -> None:
    """Enough other conversations to push a session out of every per-session cache."""
    for number in range(100, 100 + count):
        await chat(bot, channel, number).say("hello")


def history(request: ModelRequest) -> list[tuple[object, object]]:
    return [(m["role"], m["content"]) for m in request.messages if m["role"] != "system"]


async def test_the_router_keeps_only_the_most_recently_active_sessions(
    small_bot: Clawbot, channel: MemoryChannel
) -> None:
    await talk_in_other_chats(small_bot, channel, CACHE_SIZE + 2)

    assert len(small_bot.router.sessions) == CACHE_SIZE


async def test_the_transcript_cache_keeps_only_the_most_recently_active_sessions(
    small_bot: Clawbot, channel: MemoryChannel
) -> None:
    await talk_in_other_chats(small_bot, channel, CACHE_SIZE + 2)

    assert len(small_bot.runtime.transcripts) == CACHE_SIZE


async def test_a_session_dropped_from_memory_answers_with_its_history_read_back(
    small_bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    scripted.function = lambda request: f"answer to {request.last_user_text}"
    first = chat(small_bot, channel, 1)
    await first.say("my name is Ann")
    await talk_in_other_chats(small_bot, channel, CACHE_SIZE + 2)

    await first.say("what is my name?")

    assert history(scripted.requests[-1]) == [
        ("user", "my name is Ann"),
        ("assistant", "answer to my name is Ann"),
        ("user", "what is my name?"),
    ]
    assert channel.texts[-1] == "answer to what is my name?"


async def test_a_session_dropped_from_memory_keeps_its_model_override(
    small_bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel, other: ScriptedModel
) -> None:
    first = chat(small_bot, channel, 1)
    await first.say("/model scripted/other")
    await talk_in_other_chats(small_bot, channel, CACHE_SIZE + 2)

    await first.say("which model answers?")

    assert [request.last_user_text for request in other.requests] == ["which model answers?"]


async def test_a_tool_switch_keeps_a_model_change_made_while_its_session_left_memory(
    small_bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def reply(request: ModelRequest) -> Step:
        if request.last_user_text == "hand me to the coder":
            if len(request.tool_results) == 0:
                entered.set()
                await release.wait()
                return call("session_set_agent", agent="coder")
            return "Switched."
        return "hi"

    scripted.function = reply
    first = chat(small_bot, channel, 1)
    turn = asyncio.create_task(first.say("hand me to the coder"))
    await entered.wait()
    await first.say("/model scripted/other")
    await talk_in_other_chats(small_bot, channel, CACHE_SIZE + 2)
    release.set()
    await turn

    session = await small_bot.router.session_for(channel.message("x", chat_id="chat1"))
    assert (session.agent_id, session.model_override) == ("coder", "scripted/other")


async def test_a_restart_that_records_held_back_chatter_keeps_no_state_for_that_group(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    settings = Settings(home=tmp_path / "home", model=scripted.model_string, _env_file=None)  # type: ignore[call-arg]
    group = MemoryChannel().message("x", chat_id="group1", chat_type="group")
    async with await Clawbot.open(settings) as bot:
        session = await bot.router.session_for(group)
        # A process that held chatter back during a turn and died before recording it.
        chatter = TranscriptEntry(role="user", content=(TextBlock(text="[bob] lunch?"),))
        await bot.store.backlog.defer_context(session, chatter)

    async with await Clawbot.open(settings) as bot:
        await bot.start()

        assert await bot.store.transcripts.count(session.key, session.epoch) == 1
        # No public view counts the sessions the scheduler tracks; an idle one must not stay.
        assert session.key not in bot.scheduler._queues
