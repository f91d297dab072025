"""`/attach PATH [text]` in `clawbot chat`: a local file sent with a message, read when the
turn needs it under the same caps as a platform's download."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from adapters.console import ConsoleAdapter, attached_inbound
from clawbot.app import Clawbot
from clawbot.cli.chat_intake import ChatIntake
from clawbot.errors import InputError
from clawbot.settings import Settings
from clawbot.testing import ScriptedModel
from tests.media_files import pdf


def test_an_attach_line_becomes_a_message_carrying_the_file(tmp_path: Path) -> None:
    notes = tmp_path / "my notes.md"
    notes.write_text("# hello")

    message = attached_inbound(f'/attach "{notes}" summarise this', chat_id="local", user="ann")

    assert message.text == "summarise this"
    [attachment] = message.attachments
    assert (attachment.name, attachment.mime_type, attachment.size, attachment.ref) == (
        "my notes.md",
        "text/markdown",
        7,
        str(notes),
    )


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("/attach", "usage: /attach PATH [text]"),
        ("/attach nowhere.txt hi", "no such file: nowhere.txt"),
        ('/attach "unclosed.txt hi', "the path's closing \" is missing"),
        ("/attach . hi", ". is not a plain file"),
    ],
)
def test_an_attach_line_that_names_no_readable_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, problem: str
) -> None:
    monkeypatch.chdir(tmp_path)

    with pytest.raises(InputError, match=problem.replace("(", r"\(").replace("[", r"\[")):
        attached_inbound(line, chat_id="local", user="ann")


async def test_an_attached_file_over_the_cap_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 100)
    message = attached_inbound(f"/attach {big}", chat_id="local", user="ann")

    with pytest.raises(InputError, match="over the 50-byte limit"):
        await ConsoleAdapter(interactive=False).fetch_attachment(message.attachments[0], 50)


async def chat(tmp_path: Path, model: ScriptedModel, lines: str) -> str:
    """``clawbot chat`` piped ``lines``, in process; what it printed on stdout."""
    settings = Settings(home=tmp_path / "home", model=model.model_string, _env_file=None)  # type: ignore[call-arg]
    stdout = io.StringIO()
    adapter = ConsoleAdapter(stdin=io.BytesIO(lines.encode()), stdout=stdout, interactive=False)
    async with await Clawbot.open(settings) as bot:
        bot.connect(adapter)
        await adapter.start(ChatIntake(bot.router))
        async with asyncio.timeout(30):
            await adapter.wait_closed()
            await bot.scheduler.wait_idle()
        await adapter.stop()
    return stdout.getvalue()


async def test_an_attached_pdf_is_saved_into_the_inbox_and_named_to_the_agent(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    report = tmp_path / "report.pdf"
    report.write_bytes(pdf("Profits doubled"))
    scripted.add("It says profits doubled.")

    printed = await chat(tmp_path, scripted, f"/attach {report} what does it say?\n")

    assert printed == "It says profits doubled.\n"
    seen = scripted.requests[0].last_user_text
    assert "saved report.pdf as inbox/report.pdf (1 page; its text is in" in seen
    assert (tmp_path / "home" / "workspace" / "inbox" / "report.pdf").read_bytes() == (
        report.read_bytes()
    )


async def test_an_attach_line_naming_no_file_is_told_on_stderr_and_nothing_is_sent(
    tmp_path: Path, scripted: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = await chat(tmp_path, scripted, "/attach missing.pdf read it\nhello\n")

    assert printed == "ok\n"  # the answer to "hello" alone
    assert [r.last_user_text for r in scripted.requests] == ["hello"]
    assert "clawbot: no such file: missing.pdf" in capsys.readouterr().err
