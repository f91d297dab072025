"""Replies streamed to Telegram, Discord and Slack: the real adapters against the stand-ins,
through the whole pipeline, under each platform's rate rules (setup: tests/live_chats.py).

The model streams through the real litellm path, a chunk when the test lets it out. What a
person would see is asserted: the chat ends with exactly the reply, in the parts any reply is
cut in, each part once; no call came before a wait the platform asked for was over.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from clawbot.testing import ScriptedModel, StreamPace, answer, call
from tests.live_chats import CHUNK, Platform, long_reply, serving

PLATFORMS: list[Platform] = ["telegram", "discord", "slack"]
REPLY = long_reply(10_000)
CHUNKS = -(-len(REPLY) // CHUNK)


@pytest.fixture
def pace(scripted: ScriptedModel) -> StreamPace:
    """The model streams ``REPLY`` in ``CHUNKS`` chunks, each when the test lets it out."""
    scripted.chunk_size = CHUNK
    scripted.pace = StreamPace()
    scripted.add(REPLY)
    return scripted.pace


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_a_long_reply_under_a_strict_rate_ends_as_exactly_its_text_once(
    platform: Platform, tmp_path: Path, scripted: ScriptedModel, pace: StreamPace
) -> None:
    async with serving(platform, tmp_path / "home", scripted, strictness="strict") as live:
        await live.say("tell me everything")
        await live.stream(pace, REPLY)

        activity = live.activity()
        assert live.shows() == live.parts(REPLY)
        assert activity.messages == len(live.parts(REPLY))  # each part once
        assert 0 < activity.edits < CHUNKS  # shown while written, intermediate texts dropped
        assert (activity.refused, activity.unhonoured) == (0, 0)


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_a_platform_that_asks_to_wait_again_and_again_is_waited_out_each_time(
    platform: Platform, tmp_path: Path, scripted: ScriptedModel, pace: StreamPace
) -> None:
    async with serving(platform, tmp_path / "home", scripted, strictness="stricter") as live:
        await live.say("tell me everything")
        await live.stream(pace, REPLY)

        activity = live.activity()
        assert live.shows() == live.parts(REPLY)
        assert activity.messages == len(live.parts(REPLY))
        assert activity.unhonoured == 0
        if platform != "discord":  # discord.py waits before Discord would refuse (headers)
            assert activity.refused > 0


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_a_preview_that_can_no_longer_be_edited_ends_with_the_reply_sent_once(
    platform: Platform, tmp_path: Path, scripted: ScriptedModel, pace: StreamPace
) -> None:
    async with serving(platform, tmp_path / "home", scripted) as live:
        await live.say("tell me everything")

        def delete_the_preview() -> None:
            live.standin.delete(live.chat, live.sent()[0].message_id)

        await live.stream(pace, REPLY, once_shown=delete_the_preview)

        assert live.shows() == live.parts(REPLY)
        assert live.activity().messages == len(live.parts(REPLY)) + 1  # the deleted preview


async def test_a_private_telegram_chat_shows_the_reply_in_a_draft_then_as_its_messages(
    tmp_path: Path, scripted: ScriptedModel, pace: StreamPace
) -> None:
    async with serving(
        "telegram", tmp_path / "home", scripted, chat_type="dm", strictness="strict"
    ) as live:
        await live.say("tell me everything")
        await live.stream(pace, REPLY)

        activity = live.activity()
        assert live.shows() == live.parts(REPLY)
        assert activity.messages == len(live.parts(REPLY))
        assert (activity.drafts > 0, activity.edits) == (True, 0)
        assert (activity.refused, activity.unhonoured) == (0, 0)
        assert (
            live.standin.server.draft_shown(int(live.chat)) is None
        )  # the messages took its place


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_previews_a_shorter_reply_no_longer_needs_are_deleted(
    platform: Platform, tmp_path: Path, scripted: ScriptedModel
) -> None:
    scripted.chunk_size = CHUNK
    scripted.pace = StreamPace()
    scripted.add(answer(REPLY, call("file_read", path="notes.md")), "Nothing to add.")
    async with serving(platform, tmp_path / "home", scripted, strictness="strict") as live:
        (live.bot.workspace.root / "notes.md").write_text("hi")
        previews = len(live.parts(REPLY))
        await live.say("think it over")
        scripted.pace.allow(CHUNKS)  # the first round's text, not yet its tool call
        await live.standin.harness.wait_sent(previews, timeout=30)  # shown in full
        scripted.pace.release()
        await asyncio.wait_for(live.service.idle(), 60)

        activity = live.activity()
        assert live.shows() == ["Nothing to add."]
        assert (activity.messages, activity.deletes) == (previews, previews - 1)
        assert (activity.refused, activity.unhonoured) == (0, 0)
