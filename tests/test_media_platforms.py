"""Images, voice and files sent on each platform, through the whole pipeline: the real
adapter against its stand-in (Telegram ``getFile`` and ``/file/bot<token>/...``, Discord's
signed CDN URLs, Slack ``files.info`` and ``url_private`` with the bot token), the service,
router and runtime with the media plug-in, scripted models behind the real litellm calls.

What each stand-in serves, and refuses, is the platform's: a Telegram file id it does not
know, a Discord URL past its expiry or without its signature, a Slack file deleted or
fetched without the bot token."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from clawbot.app import Clawbot
from clawbot.cli.service import Service
from clawbot.routing.access import AccessGateway
from clawbot.settings import Settings
from clawbot.testing import ScriptedModel, call
from tests.media_files import JPEG_START, OGG_VOICE, pdf
from tests.standins.discord import DiscordHarness
from tests.standins.harness import MediaHarness, SentRecord
from tests.standins.slack import SlackHarness
from tests.standins.telegram import TelegramHarness

OWNER = "1001"
PHOTO = JPEG_START + bytes(range(256)) * 4
PHOTO_URL = "data:image/jpeg;base64," + base64.b64encode(PHOTO).decode()
PLATFORMS: dict[str, Callable[[], MediaHarness]] = {
    "telegram": TelegramHarness,
    "discord": DiscordHarness,
    "slack": lambda: SlackHarness("socket"),
}


@pytest.fixture
def eye() -> Iterator[ScriptedModel]:
    model = ScriptedModel(name="eye", vision=True)
    with model.installed():
        yield model


@pytest.fixture
def ears() -> Iterator[ScriptedModel]:
    model = ScriptedModel(name="ears")
    with model.installed():
        yield model


@dataclass
class World:
    harness: MediaHarness
    bot: Clawbot
    model: ScriptedModel

    async def reply(self, text: str) -> list[SentRecord]:
        """Wait for the reply ``text``; everything the bot sent until then."""

        async def found() -> list[SentRecord]:
            while not any(r.text == text for r in self.harness.sent()):
                await self.harness.wait_sent(len(self.harness.sent()) + 1, timeout=10)
            return self.harness.sent()

        return await asyncio.wait_for(found(), 10)

    async def stored(self) -> list[Any]:
        [key] = await self.bot.store.sessions.keys()
        return await self.bot.store.transcripts.load(key, 0)

    def seen(self, index: int = -1) -> str:
        """The text of the user messages of one request the model received."""
        lines = []
        for message in self.model.requests[index].messages:
            if message["role"] == "user":
                content = message["content"]
                if isinstance(content, str):
                    content = [{"type": "text", "text": content}]
                lines += [p["text"] for p in content if p["type"] == "text"]
        return "\n".join(lines)


@pytest.fixture
def download_timeout() -> float:
    """Seconds a download may take: ample, so a loaded machine never turns a photo into a
    "took too long" notice; the test of that notice sets its own (parametrized)."""
    return 30.0


@pytest.fixture(params=sorted(PLATFORMS))
async def world(
    request: pytest.FixtureRequest,
    settings: Settings,
    eye: ScriptedModel,
    ears: ScriptedModel,
    download_timeout: float,
) -> AsyncIterator[World]:
    harness = PLATFORMS[request.param]()
    await harness.start()
    bot_settings = settings.model_copy(
        update={
            "model": eye.model_string,
            "transcription_model": ears.model_string,
            "allowed_senders": [f"{harness.channel}:{OWNER}"],
            "media_download_timeout": download_timeout,
            "image_max_bytes": 4000,
            # these tests read the replies as sent; streamed replies have tests of their own
            "streaming": False,
        }
    )
    try:
        async with await Clawbot.open(bot_settings) as bot:
            bot.router.access = AccessGateway(bot.store, bot.settings)  # as `clawbot run` does
            service = Service(bot, [harness.make_adapter()], shutdown_timeout=10)
            await service.start()
            try:
                yield World(harness, bot, eye)
            finally:
                await service.stop()
    finally:
        await harness.stop()


async def test_a_photo_reaches_the_vision_model_as_an_image_block(world: World) -> None:
    world.model.add("A photo.")

    await world.harness.send_image(PHOTO, caption="what is this?")
    await world.reply("A photo.")

    [request] = world.model.requests
    assert request.images == [PHOTO_URL]
    assert "what is this?" in world.seen()


async def test_the_transcript_holds_a_reference_to_the_photo_not_its_bytes(world: World) -> None:
    world.model.add("A photo.")

    await world.harness.send_image(PHOTO)
    await world.reply("A photo.")

    [user, *_] = await world.stored()
    [attachment] = user.attachments
    assert (attachment.channel, attachment.mime_type) == (world.harness.channel, "image/jpeg")
    files = b"".join(p.read_bytes() for p in world.bot.settings.home.glob("clawbot.db*"))
    assert base64.b64encode(PHOTO) not in files and PHOTO not in files


async def test_a_later_turn_says_the_photo_is_gone_once_the_platform_no_longer_serves_it(
    world: World,
) -> None:
    world.model.add("A photo.", "Still a photo.", "I no longer have it.")
    await world.harness.send_image(PHOTO)
    await world.reply("A photo.")
    await world.harness.inject_message("and again?")
    await world.reply("Still a photo.")

    world.harness.lose_files()
    await world.harness.inject_message("and now?")
    await world.reply("I no longer have it.")

    assert world.model.requests[1].images == [PHOTO_URL]
    assert world.model.requests[2].images == []
    assert "is no longer available:" in world.seen(2)


async def test_a_voice_note_is_transcribed_and_the_agent_reads_its_length_and_words(
    world: World, ears: ScriptedModel
) -> None:
    ears.hear("call mum at six")
    world.model.add("Noted.")

    await world.harness.send_voice(OGG_VOICE, seconds=12)
    await world.reply("Noted.")

    assert "voice note, 12 s, transcribed: call mum at six" in world.seen()
    [heard] = ears.transcriptions
    assert heard.audio == OGG_VOICE


async def test_a_pdf_is_saved_into_the_inbox_and_named_to_the_agent(world: World) -> None:
    report = pdf("Quarterly revenue rose")
    world.model.add(call("file_read", path="inbox/report.pdf.txt"), "Revenue rose.")

    await world.harness.send_file(report, "report.pdf", "application/pdf", caption="read this")
    await world.reply("Revenue rose.")

    assert "saved report.pdf as inbox/report.pdf (1 page; its text is in" in world.seen(0)
    assert (world.bot.workspace.root / "inbox" / "report.pdf").read_bytes() == report
    assert "Quarterly revenue rose" in world.model.requests[1].tool_results[0]


async def test_a_document_named_with_path_tricks_is_saved_under_a_safe_name(world: World) -> None:
    world.model.add("Saved.")

    await world.harness.send_file(b"ssh-rsa AAAA", "../../.ssh/authorized_keys", "text/plain")
    await world.reply("Saved.")

    root = world.bot.workspace.root
    assert (root / "inbox" / "authorized_keys").read_bytes() == b"ssh-rsa AAAA"
    assert not (root.parent / ".ssh").exists()


async def test_a_photo_over_the_image_limit_is_refused_naming_it(world: World) -> None:
    world.model.add("Sorry.")

    await world.harness.send_image(PHOTO + b"\0" * 5000)
    sent = await world.reply("Sorry.")

    assert world.model.requests[0].images == []
    assert any("over the 4 KB limit (CLAWBOT_IMAGE_MAX_BYTES)" in r.text for r in sent)


async def test_a_file_of_a_type_not_taken_is_refused_saying_what_is_taken(world: World) -> None:
    world.model.add("Sorry.")

    await world.harness.send_file(b"\0" * 64, "clip.mp4", "video/mp4")
    sent = await world.reply("Sorry.")

    refusal = "I can't use clip.mp4: its type (video/mp4) is not one I take"
    assert any(refusal in r.text for r in sent)


@pytest.mark.parametrize("download_timeout", [0.5])
async def test_a_download_that_takes_too_long_is_told_and_the_turn_goes_on(world: World) -> None:
    release = asyncio.Event()
    world.harness.hold_downloads(release)
    world.model.add("Without the file, then.")
    try:
        await world.harness.send_file(b"notes", "notes.txt", "text/plain", caption="see this")
        sent = await world.reply("Without the file, then.")
    finally:
        release.set()

    assert any("downloading notes.txt took longer than 0.5 s" in r.text for r in sent)
    assert "notes.txt: not saved (downloading notes.txt took longer than 0.5 s)" in world.seen()
