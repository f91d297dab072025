"""Images, voice and files people send, through the whole pipeline on the in-process channel:
router, scheduler, runtime with the media plug-in, scripted models behind the real litellm
calls (``acompletion`` with image blocks, ``atranscription``), a real SQLite file and a real
workspace. The platforms' own downloads are in tests/test_media_platforms.py."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from clawbot.app import Clawbot
from clawbot.clock import ManualClock
from clawbot.messages import Attachment
from clawbot.routing.access import AccessGateway
from clawbot.routing.router import Handled
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedFailure, ScriptedModel, call
from tests.conftest import add_agent
from tests.media_files import OGG_VOICE, pdf, png
from tests.test_recovery import HeldModel

KEY = "memory:chat1"
PNG = png()
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


@pytest.fixture
def eye() -> Iterator[ScriptedModel]:
    """A chat model that sees images (litellm's model info says so)."""
    model = ScriptedModel(name="eye", vision=True)
    with model.installed():
        yield model


@pytest.fixture
def ears() -> Iterator[ScriptedModel]:
    """A speech-to-text model."""
    model = ScriptedModel(name="ears")
    with model.installed():
        yield model


@asynccontextmanager
async def opened(
    tmp_path: Path, model: ScriptedModel, **updates: Any
) -> AsyncIterator[tuple[Clawbot, MemoryChannel]]:
    settings = Settings(
        home=tmp_path / "home",
        model=model.model_string,
        retry_backoff=0,
        _env_file=None,  # type: ignore[call-arg]
        **updates,
    )
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        yield bot, channel


async def send(
    bot: Clawbot, channel: MemoryChannel, text: str, *files: Attachment, **fields: Any
) -> Handled:
    return await bot.router.handle(channel.message(text, attachments=files, **fields))


def user_parts(model: ScriptedModel, index: int = -1) -> list[Any]:
    """The content parts of the user messages of one request, in order (a plain message
    as one text part)."""
    parts: list[Any] = []
    for message in model.requests[index].messages:
        if message["role"] == "user":
            content = message["content"]
            parts += content if isinstance(content, list) else [{"type": "text", "text": content}]
    return parts


def seen_text(model: ScriptedModel, index: int = -1) -> str:
    return "\n".join(p["text"] for p in user_parts(model, index) if p["type"] == "text")


def notices(channel: MemoryChannel) -> list[str]:
    return [m.text for m in channel.sent if m.kind == "notice"]


# images -------------------------------------------------------------------------------------


async def test_an_image_reaches_a_vision_model_as_an_image_block(
    tmp_path: Path, eye: ScriptedModel
) -> None:
    eye.add("A red square.")
    async with opened(tmp_path, eye) as (bot, channel):
        photo = channel.attach("square.png", PNG, "image/png")

        handled = await send(bot, channel, "what is this?", photo)

    assert handled.reply == "A red square."
    assert user_parts(eye) == [
        {"type": "text", "text": "what is this?\n[image: square.png (image/png, 73 bytes)]"},
        {"type": "image_url", "image_url": {"url": PNG_URL}},
    ]
    assert notices(channel) == []


async def test_the_transcript_keeps_a_reference_to_an_image_never_its_bytes(
    tmp_path: Path, eye: ScriptedModel
) -> None:
    async with opened(tmp_path, eye) as (bot, channel):
        photo = channel.attach("square.png", PNG, "image/png")
        await send(bot, channel, "look", photo)
        [entry, *_] = await bot.store.transcripts.load(KEY, 0)
        stored = b"".join(p.read_bytes() for p in bot.settings.home.glob("clawbot.db*"))

    assert [a.ref for a in entry.attachments] == [photo.ref]
    assert (entry.attachments[0].channel, entry.attachments[0].name) == ("memory", "square.png")
    assert base64.b64encode(PNG) not in stored and PNG not in stored


async def test_a_later_turn_fetches_the_image_again_and_says_when_it_is_gone(
    tmp_path: Path, eye: ScriptedModel
) -> None:
    async with opened(tmp_path, eye) as (bot, channel):
        photo = channel.attach("square.png", PNG, "image/png")
        await send(bot, channel, "look", photo)
        await send(bot, channel, "and the colour?")
        channel.served.clear()  # the platform dropped its copy
        await send(bot, channel, "and now?")

    assert eye.requests[1].images == [PNG_URL]
    assert eye.requests[2].images == []
    assert "[square.png is no longer available: square.png is no longer on the memory channel]" in (
        seen_text(eye, 2)
    )
    assert notices(channel) == []  # an old image gone is the model's business, not news


async def test_older_images_beyond_the_per_request_limit_are_named_only(
    tmp_path: Path, eye: ScriptedModel
) -> None:
    other = png(3, 3)
    async with opened(tmp_path, eye, images_per_request=1) as (bot, channel):
        await send(bot, channel, "one", channel.attach("one.png", PNG, "image/png"))
        await send(bot, channel, "two", channel.attach("two.png", other, "image/png"))
        await send(bot, channel, "which was first?")

    assert eye.requests[2].images == ["data:image/png;base64," + base64.b64encode(other).decode()]
    assert "[one.png: an earlier image, not shown again]" in seen_text(eye, 2)


async def test_every_image_of_the_message_answered_is_shown_whatever_the_limit(
    tmp_path: Path, eye: ScriptedModel
) -> None:
    async with opened(tmp_path, eye, images_per_request=0) as (bot, channel):
        one, two = (channel.attach(f"{n}.png", PNG, "image/png") for n in ("one", "two"))
        await send(bot, channel, "compare", one, two)

    assert eye.requests[0].images == [PNG_URL, PNG_URL]


async def test_a_model_without_vision_gets_a_note_and_the_person_is_told_once(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    async with opened(tmp_path, scripted) as (bot, channel):
        await send(bot, channel, "look", channel.attach("a.png", PNG, "image/png"))
        await send(bot, channel, "and this", channel.attach("b.png", PNG, "image/png"))

    assert scripted.requests[0].images == []
    assert "[a.png: not shown, the model scripted/test cannot see images]" in seen_text(scripted, 0)
    assert notices(channel) == [
        "The model of this conversation (scripted/test) cannot see images, so it only knows "
        "the names of the images you send. Switch to one that can with /model."
    ]
    assert [m.text for m in channel.sent if m.kind == "reply"] == ["ok", "ok"]


@pytest.mark.parametrize("named", ["scripted/test", "scripted/*"])
async def test_a_model_named_in_the_vision_setting_is_shown_images_litellm_knows_nothing_of(
    tmp_path: Path, scripted: ScriptedModel, named: str
) -> None:
    async with opened(tmp_path, scripted, vision_models=[named]) as (bot, channel):
        await send(bot, channel, "look", channel.attach("a.png", PNG, "image/png"))

    assert scripted.requests[0].images == [PNG_URL]
    assert notices(channel) == []


def test_the_vision_setting_reads_a_comma_separated_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAWBOT_VISION_MODELS", "ollama/llava*, openai/my-finetune")

    settings = Settings(_env_file=None)  # type: ignore[call-arg]

    assert settings.vision_models == ["ollama/llava*", "openai/my-finetune"]


async def test_a_file_that_is_not_an_image_is_never_shown_as_one(
    tmp_path: Path, eye: ScriptedModel
) -> None:
    async with opened(tmp_path, eye) as (bot, channel):
        await send(bot, channel, "look", channel.attach("fake.png", b"<html>", "image/png"))

    assert eye.requests[0].images == []
    assert notices(channel) == [
        "I could not show the model fake.png: the file is not a JPEG, PNG, GIF or WebP image."
    ]


async def test_an_image_over_the_image_limit_is_refused_naming_the_limit(
    tmp_path: Path, eye: ScriptedModel
) -> None:
    async with opened(tmp_path, eye, image_max_bytes=50) as (bot, channel):
        handled = await send(bot, channel, "look", channel.attach("big.png", PNG, "image/png"))

    assert eye.requests[0].images == []
    assert notices(channel) == [
        "I could not show the model big.png: big.png is 73 bytes, over the 50 bytes limit "
        "(CLAWBOT_IMAGE_MAX_BYTES)."
    ]
    assert handled.reply == "ok"  # the turn went on without it


# voice --------------------------------------------------------------------------------------


async def test_a_voice_note_is_transcribed_and_the_agent_reads_where_the_words_came_from(
    tmp_path: Path, scripted: ScriptedModel, ears: ScriptedModel
) -> None:
    ears.hear("remind me to buy milk")
    async with opened(tmp_path, scripted, transcription_model=ears.model_string) as (bot, channel):
        voice = channel.attach("voice.ogg", OGG_VOICE, "audio/ogg", duration=12.4, voice=True)
        await send(bot, channel, "", voice)

    assert seen_text(scripted) == (
        "[voice note, 12 s]\n[Files received]\n"
        "- voice note, 12 s, transcribed: remind me to buy milk"
    )
    [request] = ears.transcriptions
    assert (request.model, request.file_name, request.mime_type, request.audio) == (
        "scripted/ears",
        "voice.ogg",
        "audio/ogg",
        OGG_VOICE,
    )
    assert notices(channel) == []


async def test_what_a_voice_note_said_stays_in_the_conversation_without_a_second_transcription(
    tmp_path: Path, scripted: ScriptedModel, ears: ScriptedModel
) -> None:
    ears.hear("the meeting is at noon")
    async with opened(tmp_path, scripted, transcription_model=ears.model_string) as (bot, channel):
        voice = channel.attach("voice.ogg", OGG_VOICE, "audio/ogg", duration=3, voice=True)
        await send(bot, channel, "", voice)
        await send(bot, channel, "when was it?")

    assert "transcribed: the meeting is at noon" in seen_text(scripted, 1)
    assert len(ears.transcriptions) == 1


async def test_voice_without_a_speech_model_tells_the_person_it_is_not_set_up(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    async with opened(tmp_path, scripted) as (bot, channel):
        voice = channel.attach("voice.ogg", OGG_VOICE, "audio/ogg", duration=5, voice=True)
        handled = await send(bot, channel, "", voice)

    assert notices(channel) == [
        "Voice messages are not set up here: no speech-to-text model is configured "
        "(CLAWBOT_TRANSCRIPTION_MODEL), so I could not listen to your voice note."
    ]
    assert "- voice note, 5 s: not transcribed (voice is not set up here)" in seen_text(scripted)
    assert handled.reply == "ok"


async def test_a_failing_speech_model_is_reported_and_the_turn_goes_on(
    tmp_path: Path, scripted: ScriptedModel, ears: ScriptedModel
) -> None:
    ears.hear(ScriptedFailure("server_error"))
    scripted.add("Sorry, I missed that.")
    async with opened(tmp_path, scripted, transcription_model=ears.model_string) as (bot, channel):
        song = channel.attach("song.mp3", b"ID3" + b"\0" * 40, "audio/mpeg", duration=184)
        handled = await send(bot, channel, "what is this song?", song)

    [told] = notices(channel)
    assert told.startswith(
        "I could not transcribe your audio file song.mp3: the speech-to-text model "
        "scripted/ears failed: "
    )
    assert "scripted 500" in told
    assert "- audio file song.mp3, 184 s: could not be transcribed (" in seen_text(scripted)
    assert handled.reply == "Sorry, I missed that."


# documents ----------------------------------------------------------------------------------


async def test_a_pdf_is_saved_into_the_inbox_with_its_text_beside_it_and_named_to_the_agent(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    report = pdf("Revenue rose 12 percent", "Costs fell")
    scripted.add(call("file_read", path="inbox/report.pdf.txt"), "Revenue rose.")
    async with opened(tmp_path, scripted) as (bot, channel):
        handled = await send(
            bot, channel, "summarise", channel.attach("report.pdf", report, "application/pdf")
        )
        inbox = bot.workspace.root / "inbox"

    assert "- saved report.pdf as inbox/report.pdf (2 pages; its text is in " in seen_text(
        scripted, 0
    )
    assert (inbox / "report.pdf").read_bytes() == report
    assert "Revenue rose 12 percent" in scripted.requests[1].tool_results[0]
    assert handled.reply == "Revenue rose."


async def test_a_text_file_is_saved_and_a_second_of_the_same_name_does_not_replace_it(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    async with opened(tmp_path, scripted) as (bot, channel):
        await send(bot, channel, "", channel.attach("notes.md", b"# one", "text/markdown"))
        await send(bot, channel, "", channel.attach("notes.md", b"# two", "text/markdown"))
        inbox = bot.workspace.root / "inbox"

    assert (inbox / "notes.md").read_bytes() == b"# one"
    assert (inbox / "notes-2.md").read_bytes() == b"# two"
    assert "- saved notes.md as inbox/notes-2.md (5 bytes)" in seen_text(scripted, 1)


@pytest.mark.parametrize(
    ("name", "mime_type"),
    [("README", "application/octet-stream"), ("deploy.sh", "application/x-sh")],
)
async def test_a_text_file_without_a_text_type_is_saved_as_text(
    tmp_path: Path, scripted: ScriptedModel, name: str, mime_type: str
) -> None:
    text = "línea uno\necho done\n".encode()
    async with opened(tmp_path, scripted) as (bot, channel):
        await send(bot, channel, "", channel.attach(name, text, mime_type))
        inbox = bot.workspace.root / "inbox"

    assert (inbox / name).read_bytes() == text
    assert f"- saved {name} as inbox/{name} ({len(text)} bytes)" in seen_text(scripted)
    assert notices(channel) == []


async def test_a_binary_file_without_a_type_is_still_refused(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    async with opened(tmp_path, scripted) as (bot, channel):
        binary = b"PK\x03\x04\x00\x00archive"
        await send(bot, channel, "", channel.attach("backup", binary, "application/octet-stream"))
        inbox = bot.workspace.root / "inbox"

    assert not inbox.exists()
    assert notices(channel) == [
        "I can't use backup: its type (application/octet-stream) is not one I take: I take "
        "images (JPEG, PNG, GIF, WebP), voice notes and audio, and text, Markdown, CSV and PDF "
        "files."
    ]


@pytest.mark.parametrize(
    ("sent", "saved"),
    [
        ("../../.bashrc", "bashrc"),
        ("/etc/cron.d/evil.csv", "evil.csv"),
        ("..\\..\\win.txt", "win.txt"),
        ("a\x00b.txt", "a_b.txt"),
        ("NUL.txt", "_NUL.txt"),
        ("..", "file"),
        ("invoice\u202etxt.exe", "invoice_txt.exe"),
    ],
)
async def test_a_file_name_with_path_tricks_is_saved_under_a_safe_name_in_the_inbox(
    tmp_path: Path, scripted: ScriptedModel, sent: str, saved: str
) -> None:
    async with opened(tmp_path, scripted) as (bot, channel):
        await send(bot, channel, "", channel.attach(sent, b"data", "text/plain"))
        root = bot.workspace.root

    assert (root / "inbox" / saved).read_bytes() == b"data"
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.read_bytes() == b"data"]
    assert written == [root / "inbox" / saved]


async def test_another_agent_gets_the_file_in_its_own_folder(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    async with opened(tmp_path, scripted) as (bot, channel):
        await add_agent(bot, "coder")
        await send(bot, channel, "/agent coder")
        await send(bot, channel, "", channel.attach("todo.txt", b"fix it", "text/plain"))
        folder = bot.workspace.root / "agents" / "coder" / "inbox"

    assert (folder / "todo.txt").read_bytes() == b"fix it"
    assert "- saved todo.txt as agents/coder/inbox/todo.txt (6 bytes)" in seen_text(scripted)


async def test_an_agent_without_file_tools_gets_the_text_in_the_turn(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    async with opened(tmp_path, scripted) as (bot, channel):
        await add_agent(bot, "talker", tools={"allow": ["memory_*"]})
        await send(bot, channel, "/agent talker")
        await send(bot, channel, "", channel.attach("plan.txt", b"step one", "text/plain"))

    assert "- plan.txt (this agent has no file tools, so its text follows):\nstep one" in seen_text(
        scripted
    )


# bad input ----------------------------------------------------------------------------------


async def test_a_file_over_the_limit_is_refused_naming_the_limit(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    async with opened(tmp_path, scripted, attachment_max_bytes=1000) as (bot, channel):
        big = channel.attach("big.csv", b"x" * 2500, "text/csv")
        handled = await send(bot, channel, "load this", big)
        inbox = bot.workspace.root / "inbox"

    assert notices(channel) == [
        "I could not save big.csv: big.csv is 2.5 KB, over the 1 KB limit "
        "(CLAWBOT_ATTACHMENT_MAX_BYTES) — send a smaller file."
    ]
    assert not inbox.exists()
    assert handled.reply == "ok"


async def test_a_file_of_a_type_not_taken_is_refused_saying_what_is_taken(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    async with opened(tmp_path, scripted) as (bot, channel):
        await send(bot, channel, "", channel.attach("clip.mp4", b"\0" * 10, "video/mp4"))

    assert notices(channel) == [
        "I can't use clip.mp4: its type (video/mp4) is not one I take: I take images (JPEG, "
        "PNG, GIF, WebP), voice notes and audio, and text, Markdown, CSV and PDF files."
    ]
    assert "- clip.mp4: not used (its type (video/mp4)" in seen_text(scripted)


async def test_a_download_that_fails_is_told_and_the_turn_goes_on(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    async with opened(tmp_path, scripted) as (bot, channel):
        gone = Attachment(name="lost.txt", mime_type="text/plain", size=10, ref="nowhere")
        handled = await send(bot, channel, "read this", gone)

    assert notices(channel) == [
        "I could not save lost.txt: lost.txt is no longer on the memory channel."
    ]
    assert handled.reply == "ok"


async def test_several_problems_of_one_message_are_told_in_one_notice(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    async with opened(tmp_path, scripted) as (bot, channel):
        await send(
            bot,
            channel,
            "",
            channel.attach("v1.ogg", OGG_VOICE, "audio/ogg", voice=True),
            channel.attach("v2.ogg", OGG_VOICE, "audio/ogg", voice=True),
            channel.attach("a.zip", b"PK", "application/zip"),
        )

    [told] = notices(channel)
    assert told.splitlines()[0] == "About what you sent:"
    assert told.count("Voice messages are not set up here") == 1
    assert "I can't use a.zip" in told


# across turns and restarts ------------------------------------------------------------------


async def test_in_a_group_a_photo_kept_as_context_is_shown_and_a_document_is_not_taken_in(
    tmp_path: Path, eye: ScriptedModel
) -> None:
    async with opened(tmp_path, eye, allowed_groups=["memory:team"]) as (bot, channel):
        bot.router.access = AccessGateway(bot.store, bot.settings)
        group: dict[str, Any] = {"chat_id": "team", "chat_type": "group", "sender_name": "Bo"}
        photo = channel.attach("chart.png", PNG, "image/png")
        await send(bot, channel, "our chart", photo, **group)
        notes = channel.attach("notes.txt", b"draft", "text/plain")
        await send(bot, channel, "and notes", notes, **group)
        await send(bot, channel, "what do you make of it?", mentioned=True, **group)
        inbox = bot.workspace.root / "inbox"

    [request] = eye.requests
    assert request.images == [PNG_URL]
    assert "[file: notes.txt (text/plain, 5 bytes)]" in seen_text(eye)
    assert not inbox.exists()


async def test_files_sent_while_a_turn_runs_reach_the_backlog_turn(
    tmp_path: Path, eye: ScriptedModel
) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def answer(request: ModelRequest) -> str:
        if len(eye.requests) == 1:
            started.set()
            await release.wait()
        return "ok"

    eye.function = answer
    async with opened(tmp_path, eye) as (bot, channel):
        first = await bot.router.receive(channel.message("think hard"))
        await started.wait()
        photo = channel.attach("late.png", PNG, "image/png")
        second = await bot.router.receive(channel.message("", attachments=(photo,)))
        release.set()
        await first.wait()
        await second.wait()

    assert "1. (sent late.png)" in seen_text(eye)
    assert eye.requests[-1].images == [PNG_URL]


async def test_a_turn_taken_over_after_a_crash_does_not_take_its_files_in_twice(
    tmp_path: Path, scripted: ScriptedModel, ears: ScriptedModel
) -> None:
    ears.hear("buy bread")
    model = HeldModel(scripted, first="stale answer", later="Bread, noted.")
    settings = Settings(
        home=tmp_path / "home",
        model=scripted.model_string,
        transcription_model=ears.model_string,
        _env_file=None,  # type: ignore[call-arg]
    )
    clock = ManualClock()
    async with await Clawbot.open(settings, clock=clock) as crashed:
        lost = MemoryChannel()
        crashed.connect(lost)
        voice = lost.attach("voice.ogg", OGG_VOICE, "audio/ogg", duration=2, voice=True)
        await crashed.router.receive(lost.message("", attachments=(voice,)))
        await model.entered.wait()  # taken in, then the process "dies" in the model call
        async with await Clawbot.open(settings, clock=clock) as restarted:
            channel = MemoryChannel()
            restarted.connect(channel)
            await restarted.start()
            clock.advance(settings.job_lease + 1)
            await restarted.scheduler.tick()
            await restarted.scheduler.wait_idle()
            model.release.set()

    assert channel.texts == ["Bread, noted."]
    assert len(ears.transcriptions) == 1
    assert seen_text(scripted).count("[Files received]") == 1
    assert "transcribed: buy bread" in seen_text(scripted)


async def test_an_image_counts_for_the_window_as_a_picture_not_as_its_data_url(
    tmp_path: Path, eye: ScriptedModel
) -> None:
    """A 60 KB photo is 80,000 characters of base64: counted as such, it alone would pass
    the default window's threshold (16,000 tokens, 80 %) and compact the conversation."""
    photo = png(1, 1) + b"\0" * 60_000
    async with opened(tmp_path, eye) as (bot, channel):
        await send(bot, channel, "hello")
        await send(bot, channel, "look", channel.attach("big.png", photo, "image/png"))
        live = await bot.store.transcripts.live(KEY, 0)

    assert len(eye.requests) == 2  # no summary was asked for
    assert live.summary is None
    assert len(eye.requests[1].images) == 1
