"""The history a turn shows the model: the most recent entries of this conversation, within
the configured window, never starting in the middle of a tool round."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clawbot.app import Clawbot
from clawbot.messages import (
    AttachmentBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    TranscriptEntry,
)
from clawbot.runtime.transcripts import Transcript
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ScriptedModel, call

from .conftest import Chat


@pytest.fixture
async def short_memory(tmp_path: Path, scripted: ScriptedModel) -> AsyncIterator[Chat]:
    settings = Settings(
        home=tmp_path / "home",
        model=scripted.model_string,
        max_history_messages=4,
        rate_limit_per_minute=0,  # thirty messages in a moment: not what this tests
        _env_file=None,  # type: ignore[call-arg]
    )
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        yield Chat(bot, channel)


def _said(role: str, text: str, turn_id: str | None = None) -> TranscriptEntry:
    return TranscriptEntry(role=role, content=(TextBlock(text=text),), turn_id=turn_id)  # type: ignore[arg-type]


def _history(messages: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(m["role"], m["content"]) for m in messages if m["role"] != "system"]


async def test_the_model_sees_only_the_latest_messages_of_a_long_conversation(
    short_memory: Chat, scripted: ScriptedModel
) -> None:
    scripted.function = lambda request: f"answer to {request.last_user_text}"
    for number in range(1, 31):
        await short_memory.say(f"message {number}")

    assert _history(scripted.requests[-1].messages) == [
        ("user", "message 29"),
        ("assistant", "answer to message 29"),
        ("user", "message 30"),
    ]


async def test_status_counts_the_whole_conversation_beyond_the_window_and_not_earlier_ones(
    short_memory: Chat,
) -> None:
    await short_memory.say("before")
    await short_memory.say("/new")
    for number in range(12):
        await short_memory.say(f"message {number}")
    await short_memory.say("/status")

    assert "Messages in this conversation: 24" in short_memory.channel.texts[-1]


async def test_history_never_starts_inside_a_tool_round(
    short_memory: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(call("list_dir", path="."), "listed", "second answer")
    await short_memory.say("what is here?")
    await short_memory.say("and now?")

    # The window of 4 would start at the tool result; it starts at the next user message.
    assert _history(scripted.requests[-1].messages) == [("user", "and now?")]


def test_a_window_reaching_back_to_a_tool_call_keeps_the_call_with_its_result() -> None:
    transcript = Transcript(epoch=0, keep=10)
    transcript.append(
        [
            _said("user", "what is here?"),
            TranscriptEntry(
                role="assistant",
                content=(ToolCallBlock(id="c1", name="list_dir", arguments={"path": "."}),),
            ),
            TranscriptEntry(
                role="tool",
                content=(ToolResultBlock(tool_call_id="c1", name="list_dir", content="a.txt"),),
            ),
            _said("assistant", "one file"),
        ]
    )

    messages = transcript.tail(4)

    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["tool_calls"][0]["id"] == messages[2]["tool_call_id"] == "c1"


def test_a_long_conversation_keeps_a_bounded_tail_in_memory() -> None:
    transcript = Transcript(epoch=0, keep=3)
    for number in range(100):
        transcript.append([_said("user", f"q{number}"), _said("assistant", f"a{number}")])

    assert len(transcript) <= 6
    assert _history(transcript.tail(3)) == [("user", "q99"), ("assistant", "a99")]


def test_user_text_is_what_the_person_said_in_that_turn() -> None:
    transcript = Transcript(epoch=0, keep=10)
    transcript.append(
        [
            _said("user", "first", "turn_a"),
            _said("assistant", "reply", "turn_a"),
            _said("user", "second", "turn_b"),
            _said("user", "and more", "turn_b"),
        ]
    )

    assert transcript.user_text("turn_b") == "second\nand more"
    assert transcript.user_text("turn_c") == ""


def _sent_file(text: str, turn_id: str) -> TranscriptEntry:
    photo = AttachmentBlock(
        channel="memory", ref=f"ref-{text}", name=f"{text}.png", mime_type="image/png"
    )
    return TranscriptEntry(role="user", content=(TextBlock(text=text), photo), turn_id=turn_id)


def test_the_messages_that_came_with_files_are_listed_while_they_are_held() -> None:
    transcript = Transcript(epoch=0, keep=2)
    transcript.append([_sent_file("first", "t1"), _said("assistant", "ok", "t1")])
    for n in range(3):
        transcript.append([_said("user", f"more {n}", f"u{n}"), _said("assistant", "ok")])
    transcript.append([_sent_file("last", "t9")])

    [held] = transcript.attached()  # the first fell out of the window with its message
    assert (held.turn_id, [f.name for f in held.files]) == ("t9", ["last.png"])
    assert transcript.tail(1)[0] is held.message
    assert held.message["content"] == "last\n[image: last.png (image/png)]"
