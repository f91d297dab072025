"""Slash commands are answered at once, before and instead of any LLM call."""

from __future__ import annotations

import pytest

from clawbot.messages import parse_command
from clawbot.testing import MemoryChannel, ScriptedModel

from .conftest import Chat


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("/help", ("help", "")),
        ("/model openai/gpt-4o", ("model", "openai/gpt-4o")),
        ("/status@clawbot_bot", ("status", "")),
        ("  /NEW  ", ("new", "")),
        ("/", None),
        ("// comment", None),
        ("/usr/bin/env is a path", None),
        ("hello /help", None),
    ],
)
def test_parse_command(text: str, parsed: tuple[str, str] | None) -> None:
    assert parse_command(text) == parsed


async def test_help_lists_the_commands_without_calling_the_model(
    chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await chat.say("/help")

    assert "/new or /reset" in channel.texts[0]
    assert "/status" in channel.texts[0]
    assert scripted.requests == []


async def test_unknown_command_gets_a_helpful_reply_and_no_turn(
    chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    result = await chat.say("/stauts")

    assert result.kind == "command"
    assert channel.texts == [
        "Unknown command /stauts. Did you mean /status, /start? Type /help to see the commands."
    ]
    assert scripted.requests == []


async def test_new_starts_a_fresh_conversation_and_keeps_the_old_one_stored(
    chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await chat.say("my name is Ann")
    await chat.say("/new")
    await chat.say("what is my name?")

    users = [m["content"] for m in scripted.requests[-1].messages if m["role"] == "user"]
    assert users == ["what is my name?"]
    assert await chat.bot.store.transcripts.count("memory:chat1") == 4
    assert channel.texts[1].startswith("Started a new conversation")


async def test_reset_is_an_alias_of_new(chat: Chat, scripted: ScriptedModel) -> None:
    await chat.say("one")
    await chat.say("/reset")
    await chat.say("two")

    users = [m["content"] for m in scripted.requests[-1].messages if m["role"] == "user"]
    assert users == ["two"]


async def test_status_shows_agent_model_and_conversation_size(
    chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await chat.say("hello")
    await chat.say("/status")

    status = channel.texts[-1]
    assert "Agent: main" in status
    assert f"Model: {scripted.model_string} (global default)" in status
    assert "Messages in this conversation: 2" in status
    assert len(scripted.requests) == 1
