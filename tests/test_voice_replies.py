"""``/voice on|off``: the choice kept with the conversation, the voice note made only after
the text went out and never instead of it. (The voice note as each platform shows it, and a
failing speech model told once: tests/test_files_out.py.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from clawbot.app import Clawbot
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ScriptedFailure, ScriptedModel, scripted_audio

from .conftest import Chat

FAILED = "The voice note of this reply failed"


@pytest.fixture
def voice() -> Iterator[ScriptedModel]:
    """The speech model (``CLAWBOT_TTS_MODEL``)."""
    model = ScriptedModel(name="voice")
    with model.installed():
        yield model


@pytest.fixture
def speaking(settings: Settings, voice: ScriptedModel) -> Settings:
    return settings.model_copy(update={"tts_model": voice.model_string})


async def test_the_voice_choice_outlives_a_restart(
    speaking: Settings, scripted: ScriptedModel, voice: ScriptedModel
) -> None:
    async with await Clawbot.open(speaking) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await Chat(bot, channel).say("/voice on")

    async with await Clawbot.open(speaking) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        scripted.add("Still here.")
        await Chat(bot, channel).say("are you there?")
        await bot.scheduler.wait_idle()

    assert channel.texts == ["Still here."]
    assert [(f.kind, f.data) for f in channel.files] == [("voice", scripted_audio("Still here."))]


async def test_voice_off_sends_text_only_again(
    speaking: Settings, scripted: ScriptedModel, voice: ScriptedModel
) -> None:
    async with await Clawbot.open(speaking) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        chat = Chat(bot, channel)
        await chat.say("/voice on")
        await chat.say("/voice off")
        scripted.add("Text only.")

        await chat.say("hello")
        await bot.scheduler.wait_idle()

    assert channel.texts[-1] == "Text only."
    assert channel.files == []
    assert voice.speech_requests == []


async def test_voice_on_without_a_speech_model_says_it_is_not_set_up_and_stays_off(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await chat.say("/voice on")
    scripted.add("Plain answer.")
    await chat.say("hello")
    await bot.scheduler.wait_idle()

    assert channel.texts[0].startswith("Voice notes are not set up here")
    assert "CLAWBOT_TTS_MODEL" in channel.texts[0]
    assert channel.texts[-1] == "Plain answer."
    assert channel.files == []


async def test_after_a_voice_note_went_out_a_new_failure_is_told_again(
    speaking: Settings, scripted: ScriptedModel, voice: ScriptedModel
) -> None:
    async with await Clawbot.open(speaking) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        chat = Chat(bot, channel)
        await chat.say("/voice on")
        scripted.add("One.", "Two.", "Three.", "Four.")
        for text, speech in (("a", "fail"), ("b", "fail"), ("c", "works"), ("d", "fail")):
            voice.speech = ScriptedFailure("server_error") if speech == "fail" else None
            await chat.say(text)
            await bot.scheduler.wait_idle()

    said = [text.split(" (")[0] if text.startswith(FAILED) else text for text in channel.texts]
    turned_on = "Voice notes are on: each reply also comes read aloud, after its text."
    assert said == [turned_on, "One.", FAILED, "Two.", "Three.", "Four.", FAILED]
    assert [f.data for f in channel.files] == [scripted_audio("Three.")]


async def test_a_stop_while_the_reply_is_read_aloud_leaves_the_turn_done(
    speaking: Settings, scripted: ScriptedModel, voice: ScriptedModel
) -> None:
    voice.delay = 60.0  # the speech model takes long: /stop comes first
    async with await Clawbot.open(speaking) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        chat = Chat(bot, channel)
        await chat.say("/voice on")
        scripted.add("The answer.")
        handle = await bot.router.receive(channel.message("question"))
        await channel.sent_when(lambda message: message.text == "The answer.")

        await chat.say("/stop")
        await handle.wait()

        jobs = await bot.store.jobs.for_session("memory:chat1")
    assert [job.status for job in jobs] == ["done"]
    assert channel.files == []
    assert channel.texts.count("The answer.") == 1
