"""``send_file`` confined as every file tool is: only within the session's reach, never
through a link swapped in meanwhile, never from an internal session to a platform, and never
a file too big for the platform, refused before anyone is asked to approve it. (How each
platform shows what it sends: tests/test_files_out.py.)"""

from __future__ import annotations

from pathlib import Path

from clawbot.app import Clawbot
from clawbot.channels.outbox import Outbox
from clawbot.messages import ToolCallBlock
from clawbot.policies import ToolPolicy
from clawbot.redaction import REDACTED
from clawbot.security.reach import Reach, Root
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ScriptedModel, call
from clawbot.tools.registry import ToolRegistry
from clawbot.tools.sending import send_file_tool
from tests.standins.uploads import PDF, png

from .conftest import Chat, add_agent
from .test_approvals import is_request
from .test_file_race import CALLS, OUTSIDE, Race, context, resolution, swapping  # noqa: F401
from .test_redaction import OPENAI_KEY


def sending_to(channel: MemoryChannel) -> ToolRegistry:
    outbox = Outbox()
    outbox.connect(channel)
    return ToolRegistry([send_file_tool(outbox)])


async def test_a_file_outside_the_sessions_reach_is_refused_and_nothing_is_sent(
    tmp_path: Path,
) -> None:
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "notes.txt").write_text("not yours")
    channel = MemoryChannel("c")  # the channel of the test context's session
    ctx = context(tmp_path, Reach((Root("public", write=False),)))

    result = await sending_to(channel).execute(
        ToolCallBlock(id="1", name="send_file", arguments={"path": "private/notes.txt"}), ctx
    )

    assert result.is_error
    assert result.content.startswith("error: private/notes.txt is outside this session's reach")
    assert channel.files == []


async def test_a_link_swapped_in_never_sends_a_file_from_outside(
    swapping: Race,  # noqa: F811
    resolution: str,  # noqa: F811
) -> None:
    channel = MemoryChannel("c")
    registry = sending_to(channel)
    ctx = context(swapping.workspace, Reach.whole())
    paths = ["d/secret.txt", "d/sub/secret.txt", "f"]

    for number in range(CALLS):
        arguments = {"path": paths[number % 3]}
        result = await registry.execute(
            ToolCallBlock(id=str(number), name="send_file", arguments=arguments), ctx
        )
        swapping.account("send_file", result.content, result.is_error)

    assert [file.name for file in channel.files if OUTSIDE.encode() in file.data] == []
    assert channel.files  # the files inside went out meanwhile
    assert swapping.saw_the_swap()


async def test_a_subagents_send_file_reaches_no_platform(
    bot: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    await add_agent(bot, "researcher", model=worker.model_string)
    folder = bot.workspace.root / "agents" / "researcher"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "chart.png").write_bytes(png())
    scripted.add(call("sessions_spawn", task="chart it", agent="researcher"), "Started.", "Ok.")
    worker.add(call("send_file", path="agents/researcher/chart.png"), "Made the chart.")

    await chat.say("make me a chart")
    await bot.scheduler.wait_idle()

    assert "send_file" in worker.requests[0].tool_names
    (result,) = worker.requests[1].tool_results
    assert result.startswith("error: this conversation reaches no chat (a subagent's")
    assert channel.files == []


async def test_a_file_too_big_is_refused_before_anyone_is_asked_to_approve_it(
    settings: Settings, scripted: ScriptedModel
) -> None:
    async with await Clawbot.open(settings.model_copy(update={"autonomy": "supervised"})) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        limit = channel.limits.max_upload_bytes
        with (bot.workspace.root / "video.mp4").open("wb") as file:  # sparse: only its size
            file.truncate(limit + 1)
        scripted.add(call("send_file", path="video.mp4"), "Too big to send.")

        await bot.router.handle(channel.message("send me the video"))
        await bot.scheduler.wait_idle()

    (result,) = scripted.requests[1].tool_results
    assert result == (
        f"error: not run: video.mp4 is {limit + 1:,} bytes, over Memory's limit of 50 MB per file"
        " — send a smaller file: compress it, or split it into parts"
    )
    assert not any(is_request(message) for message in channel.sent)
    assert channel.texts[-1] == "Too big to send."
    assert channel.files == []


async def test_a_file_named_like_an_image_that_is_none_goes_as_a_document(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    (bot.workspace.root / "photo.png").write_text("just text")
    scripted.add(call("send_file", path="photo.png"), "Sent.")

    await chat.say("send the photo")

    (sent,) = channel.files
    assert (sent.name, sent.kind, sent.data) == ("photo.png", "document", b"just text")


async def test_a_key_in_a_caption_reaches_the_chat_masked(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    (bot.workspace.root / "notes.txt").write_text("notes")
    scripted.add(call("send_file", path="notes.txt", caption=f"key: {OPENAI_KEY}"), "Sent.")

    await chat.say("send the notes")

    (sent,) = channel.files
    assert sent.caption == f"key: {REDACTED}"


async def test_an_agent_whose_only_file_tool_is_send_file_sends_from_its_own_folder(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await add_agent(
        bot, "poster", model=scripted.model_string, tools=ToolPolicy(allow=("send_file",))
    )
    folder = bot.workspace.root / "agents" / "poster"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "flyer.pdf").write_bytes(PDF)
    await chat.say("/agent poster")
    scripted.add(call("send_file", path="agents/poster/flyer.pdf"), "Here is the flyer.")

    await chat.say("the flyer, please")

    assert scripted.requests[-1].tool_names == ["send_file"]
    assert [(f.name, f.kind, f.data) for f in channel.files] == [("flyer.pdf", "document", PDF)]


async def test_a_file_whose_name_holds_a_newline_goes_out_under_a_printable_name(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    (bot.workspace.root / "two\nlines.txt").write_text("hi")
    scripted.add(call("send_file", path="two\nlines.txt"), "Sent.")

    await chat.say("send it")

    assert [file.name for file in channel.files] == ["two_lines.txt"]
