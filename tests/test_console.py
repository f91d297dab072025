"""The terminal channel's normalization."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

from adapters.console import ConsoleAdapter, decode_line, to_inbound
from adapters.console_files import saved_copy
from clawbot.app import Clawbot
from clawbot.cli.chat_intake import ChatIntake
from clawbot.messages import InboundMessage, OutboundFile, OutboundMessage
from clawbot.settings import Settings
from clawbot.testing import ModelRequest, ScriptedModel


def test_a_typed_line_becomes_a_dm_from_the_local_user() -> None:
    message = to_inbound("hello\n", chat_id="local", user="ann")

    assert message == InboundMessage(
        channel="console",
        chat_id="local",
        chat_type="dm",
        sender_id="ann",
        sender_name="ann",
        text="hello",
        mentioned=True,
        received_at=message.received_at,
    )


def test_windows_line_endings_are_stripped() -> None:
    assert to_inbound("hi\r\n", chat_id="local", user="ann").text == "hi"


def test_invalid_utf8_is_recognised() -> None:
    assert decode_line(b"\xff\xfe oops\n") is None
    assert decode_line("héllo\n".encode()) == "héllo\n"


async def test_piped_lines_are_handled_in_order_each_reply_before_the_next_line() -> None:
    stdout = io.StringIO()
    adapter = ConsoleAdapter(stdin=io.BytesIO(b"one\ntwo\n"), stdout=stdout, interactive=False)
    seen: list[str] = []

    async def on_message(message: InboundMessage) -> None:
        seen.append(message.text)
        await adapter.send(
            OutboundMessage(channel="console", chat_id="local", text=f"re: {message.text}")
        )

    await adapter.start(on_message)
    await adapter.wait_closed()

    assert seen == ["one", "two"]
    assert stdout.getvalue() == "re: one\nre: two\n"


async def test_piped_commands_are_answered_while_a_turn_runs_and_stop_stops_it(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    """`/queue` and `/stop` read while the turn before them runs are answered at once."""
    never = asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        await never.wait()
        return "too late"

    scripted.function = slow
    settings = Settings(home=tmp_path / "home", model=scripted.model_string, _env_file=None)  # type: ignore[call-arg]
    stdout = io.StringIO()
    adapter = ConsoleAdapter(
        stdin=io.BytesIO(b"take your time\n/queue\n/stop\n"), stdout=stdout, interactive=False
    )
    async with await Clawbot.open(settings) as bot:
        bot.connect(adapter)
        await adapter.start(ChatIntake(bot.router))
        async with asyncio.timeout(30):
            await adapter.wait_closed()
            await bot.scheduler.wait_idle()
        await adapter.stop()

    lines = stdout.getvalue().splitlines()
    assert lines[0].startswith("Running: a turn in the main lane for ")
    assert lines[1] == "Stopped the running turn."
    assert "too late" not in stdout.getvalue()


def test_a_sent_file_is_saved_beneath_the_downloads_under_a_new_name_each_time(
    tmp_path: Path,
) -> None:
    downloads = tmp_path / "downloads"

    def sent(name: str, data: bytes) -> OutboundFile:
        return OutboundFile(channel="console", chat_id="local", name=name, data=data)

    first = saved_copy(downloads, sent("report.csv", b"one"))
    second = saved_copy(downloads, sent("report.csv", b"two"))
    tricky = saved_copy(downloads, sent("../../.bashrc", b"three"))

    assert (first.name, first.read_bytes()) == ("report.csv", b"one")
    assert (second.name, second.read_bytes()) == ("report-2.csv", b"two")
    assert (tricky.parent, tricky.name) == (downloads, "bashrc")
