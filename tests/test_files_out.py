"""Files out, on each platform through its stand-in: ``send_file`` sends a workspace file as
the platform shows its kind (a photo, a voice note, audio, a document) with its caption, and
refuses what the platform would not take, saying why; ``/voice on`` sends each reply a second
time, read aloud, after its text.

Real adapter <-> platform stand-in (Telegram's multipart uploads, Discord's attachments,
Slack's external upload), service, router, runtime with a scripted model, outbox.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clawbot.app import Clawbot
from clawbot.cli.service import Service
from clawbot.settings import Settings
from clawbot.testing import ScriptedFailure, ScriptedModel, call, scripted_audio
from tests.standins.discord import DiscordHarness
from tests.standins.harness import FileHarness, ReceivedFile
from tests.standins.slack import SlackHarness
from tests.standins.telegram import TelegramHarness
from tests.standins.uploads import MP3, OGG_OPUS, PDF, png

MB = 1024 * 1024


@dataclass(frozen=True)
class Platform:
    name: str
    harness: Callable[[], FileHarness]
    shows: dict[str, str]
    """How the chat shows each kind clawbot sends (the stand-in's ``ReceivedFile.kind``)."""
    bold: str
    """``**Q3**`` as the chat shows it in a caption."""
    caption_limit: int
    limit: int
    limit_named: str
    """The most this channel takes in one file, and how a refusal names it."""

    def __str__(self) -> str:
        return self.name


PLATFORMS = [
    Platform(
        "telegram",
        TelegramHarness,
        {"photo": "photo", "voice": "voice", "audio": "audio", "document": "document"},
        "Q3",
        1024,
        50 * MB,
        "Telegram's limit of 50 MB per file",
    ),
    Platform(
        "discord",
        DiscordHarness,
        dict.fromkeys(("photo", "voice", "audio", "document"), "attachment"),
        "**Q3**",
        2000,
        10 * MB,
        "Discord's limit of 10 MB per file",
    ),
    Platform(
        "slack",
        lambda: SlackHarness("socket"),
        dict.fromkeys(("photo", "voice", "audio", "document"), "file"),
        "*Q3*",
        4000,
        50 * MB,
        "clawbot's limit of 50 MB per file",
    ),
]


@dataclass
class World:
    platform: Platform
    harness: FileHarness
    bot: Clawbot
    model: ScriptedModel

    @property
    def workspace(self) -> Path:
        return self.bot.workspace.root

    async def ask(self, text: str) -> None:
        """Say ``text`` in a DM; return once the answer arrived and its turn ended."""
        answered = len(self.harness.sent()) + 1
        await self.harness.inject_message(text)
        await self.harness.wait_sent(answered)
        await self.bot.scheduler.wait_idle()

    async def send(self, path: str, data: bytes, **arguments: Any) -> ReceivedFile:
        """Have the agent send the workspace file ``path`` holding ``data``; what arrived."""
        (self.workspace / path).write_bytes(data)
        self.model.add(call("send_file", path=path, **arguments), "Sent.")
        await self.ask(f"send me {path}")
        (received,) = await self.harness.wait_files(1)
        return received

    def telegram_calls(self, method: str) -> list[dict[str, Any]]:
        """The parameters of each call of ``method`` the Telegram stand-in took."""
        assert isinstance(self.harness, TelegramHarness)
        return [params for name, params in self.harness.server.calls if name == method]

    def tool_result(self) -> str:
        (result,) = self.model.requests[-1].tool_results
        return result


@pytest.fixture(params=PLATFORMS, ids=str)
async def world(
    request: pytest.FixtureRequest, settings: Settings, scripted: ScriptedModel
) -> AsyncIterator[World]:
    platform: Platform = request.param
    harness = platform.harness()
    await harness.start()
    # (the spoken-reply tests read the messages sent; streamed replies have tests of their own)
    bot_settings = settings.model_copy(
        update={"tts_model": scripted.model_string, "streaming": False}
    )
    try:
        async with await Clawbot.open(bot_settings) as bot:
            service = Service(bot, [harness.make_adapter()], shutdown_timeout=10)
            await service.start()
            try:
                yield World(platform, harness, bot, scripted)
            finally:
                await service.stop()
    finally:
        await harness.stop()


# send_file ---------------------------------------------------------------------------------


async def test_an_image_is_sent_as_a_photo(world: World) -> None:
    image = png()

    received = await world.send("chart.png", image)

    assert (received.name, received.kind, received.data) == (
        "chart.png",
        world.platform.shows["photo"],
        image,
    )
    assert received.content_type == "image/png"
    assert world.tool_result() == f"Sent chart.png to the chat as a photo ({len(image):,} bytes)."


async def test_an_ogg_opus_file_is_sent_as_a_voice_note(world: World) -> None:
    received = await world.send("memo.ogg", OGG_OPUS)

    assert (received.kind, received.data) == (world.platform.shows["voice"], OGG_OPUS)
    assert received.content_type == "audio/ogg"


async def test_an_mp3_file_is_sent_as_audio(world: World) -> None:
    received = await world.send("song.mp3", MP3)

    assert (received.kind, received.data) == (world.platform.shows["audio"], MP3)
    assert received.content_type == "audio/mpeg"


async def test_a_pdf_is_sent_as_a_document_with_its_caption(world: World) -> None:
    received = await world.send("report.pdf", PDF, caption="The **Q3** report")

    assert (received.name, received.kind, received.data) == (
        "report.pdf",
        world.platform.shows["document"],
        PDF,
    )
    assert received.caption == f"The {world.platform.bold} report"


async def test_a_caption_longer_than_the_platform_takes_is_cut_with_an_ellipsis(
    world: World,
) -> None:
    received = await world.send("report.pdf", PDF, caption="word " * 1000)

    assert received.caption.endswith("…")
    assert world.platform.caption_limit - 10 <= len(received.caption)
    assert len(received.caption) <= world.platform.caption_limit


async def test_a_file_over_the_limit_is_refused_naming_the_limit(world: World) -> None:
    with (world.workspace / "backup.zip").open("wb") as file:  # sparse: only its size
        file.truncate(world.platform.limit + 1)
    world.model.add(call("send_file", path="backup.zip"), "Too big.")

    await world.ask("send me the backup")

    assert world.tool_result().startswith("error: backup.zip is ")
    assert f"bytes, over {world.platform.limit_named}" in world.tool_result()
    assert world.harness.received_files() == []


async def test_a_file_the_platform_refuses_is_reported_to_the_model(world: World) -> None:
    world.harness.upload_limit = 100  # as a server whose limit is lower than the usual
    (world.workspace / "report.pdf").write_bytes(PDF * 3)
    world.model.add(call("send_file", path="report.pdf"), "It did not go.")

    await world.ask("send me the report")

    assert world.tool_result().startswith("error: report.pdf was not sent: ")
    assert "too large" in world.tool_result().lower()
    assert world.harness.received_files() == []


async def test_a_rate_limited_upload_goes_again_once_the_platform_allows_and_arrives_once(
    world: World,
) -> None:
    world.harness.fail_next_sends(1, status=429, retry_after=0)

    received = await world.send("report.pdf", PDF)

    assert received.data == PDF
    assert len(world.harness.received_files()) == 1
    assert world.tool_result().startswith("Sent report.pdf to the chat as a document")


TELEGRAM = [pytest.param(PLATFORMS[0], id="telegram")]


@pytest.mark.parametrize("world", TELEGRAM, indirect=True)
async def test_on_telegram_a_caption_refused_as_html_goes_as_plain_text(world: World) -> None:
    world.harness.reject_formatting_next()

    received = await world.send("report.pdf", PDF, caption="The **Q3** report")

    assert received.caption == "The Q3 report"
    assert "parse_mode" not in world.telegram_calls("sendDocument")[-1]


@pytest.mark.parametrize("world", TELEGRAM, indirect=True)
async def test_on_telegram_a_photo_over_10_mb_goes_as_a_document(world: World) -> None:
    image = png() + bytes(10 * MB)  # a PNG Telegram would not take as a photo

    received = await world.send("poster.png", image)

    assert (received.kind, received.name, len(received.data)) == (
        "document",
        "poster.png",
        len(image),
    )


# spoken replies ----------------------------------------------------------------------------


async def test_voice_on_sends_each_reply_as_a_voice_note_after_its_text(world: World) -> None:
    await world.ask("/voice on")
    world.model.add("Hi there, **Ann**.")

    await world.ask("hello")

    (voice,) = await world.harness.wait_files(1)
    texts = [record.text for record in world.harness.sent()]
    reply = next(n for n, text in enumerate(texts) if "Hi there" in text)
    assert voice.after > reply  # the text first
    assert voice.kind == world.platform.shows["voice"] and voice.content_type == "audio/ogg"
    assert voice.data == scripted_audio("Hi there, Ann.")
    asked = [(r.input, r.voice, r.response_format) for r in world.model.speech_requests]
    assert asked == [("Hi there, Ann.", "alloy", "opus")]


async def test_a_speech_failure_is_told_once_and_the_text_still_arrives(world: World) -> None:
    world.model.speech = ScriptedFailure("server_error")
    await world.ask("/voice on")
    world.model.add("First answer.", "Second answer.")

    await world.ask("one")
    await world.ask("two")

    texts = [record.text for record in world.harness.sent()]
    assert any("First answer." in text for text in texts)
    assert any("Second answer." in text for text in texts)
    notices = [text for text in texts if "voice note of this reply failed" in text]
    assert len(notices) == 1
    assert len(world.model.speech_requests) == 2
    assert world.harness.received_files() == []
