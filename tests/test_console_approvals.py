"""`clawbot chat` answers approval requests through its one reader: while a request is open,
a short answer among the lines read answers it; every other line stays a message or a
command, and is never swallowed."""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path

import pytest

from adapters.console import ConsoleAdapter, answer_command
from clawbot.app import Clawbot
from clawbot.cli.chat_intake import ChatIntake
from clawbot.errors import DeliveryError
from clawbot.messages import Action, InboundMessage, OutboundDeletion, OutboundMessage
from clawbot.settings import Settings
from clawbot.testing import ScriptedModel, call

ACTIONS = (
    Action(label="Approve once", command="/approve k7m2pq once"),
    Action(label="Approve for this session", command="/approve k7m2pq session"),
    Action(label="Deny", command="/deny k7m2pq"),
)
DEADLINE = 30.0


def test_short_answers_stand_for_the_buttons_commands() -> None:
    assert answer_command("o", ACTIONS) == "/approve k7m2pq once"
    assert answer_command(" Session ", ACTIONS) == "/approve k7m2pq session"
    assert answer_command("d", ACTIONS) == "/deny k7m2pq"
    assert answer_command("/approve k7m2pq", ACTIONS) == "/approve k7m2pq"
    assert answer_command("maybe", ACTIONS) is None


async def chat(tmp_path: Path, scripted: ScriptedModel, lines: bytes) -> str:
    settings = Settings(
        home=tmp_path / "home",
        model=scripted.model_string,
        autonomy="supervised",
        _env_file=None,  # type: ignore[call-arg]
    )
    stdout = io.StringIO()
    adapter = ConsoleAdapter(stdin=io.BytesIO(lines), stdout=stdout, interactive=False)
    async with await Clawbot.open(settings) as bot:
        bot.connect(adapter)
        await adapter.start(ChatIntake(bot.router))
        async with asyncio.timeout(DEADLINE):
            await adapter.wait_closed()
            await bot.scheduler.wait_idle()
        await adapter.stop()
    return stdout.getvalue()


async def test_the_next_line_answers_the_request_and_the_turn_goes_on(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    scripted.add(call("file_write", path="a.md", content="hi"), "Written.")

    out = await chat(tmp_path, scripted, b"write a.md\no\n")

    lines = out.splitlines()
    assert lines[0].startswith("[main]: Approval needed (")
    assert lines[-2].startswith("Approved once: file_write (")
    assert lines[-1] == "Written."
    assert (tmp_path / "home" / "workspace" / "a.md").read_text() == "hi"


async def test_a_line_that_is_no_answer_reaches_the_agent_and_the_answer_after_it_answers(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    scripted.add(call("file_write", path="a.md", content="hi"), "Not written.", "Maybe what?")

    out = await chat(tmp_path, scripted, b"write a.md\nmaybe\nd\n")

    lines = out.splitlines()
    assert lines[-3].startswith("Denied: file_write (")
    assert lines[-2:] == ["Not written.", "Maybe what?"]
    assert scripted.requests[-1].last_user_text == "maybe"
    assert not (tmp_path / "home" / "workspace" / "a.md").exists()


async def test_the_end_of_input_denies_a_waiting_request(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    scripted.add(call("file_write", path="a.md", content="hi"), "Not written.")

    out = await chat(tmp_path, scripted, b"write a.md\n")

    assert out.splitlines()[-2].startswith("Denied: file_write (")
    assert out.splitlines()[-1] == "Not written."


async def test_lines_after_a_request_no_turn_waits_on_all_reach_the_agent() -> None:
    """A subagent's request arrives after its parent's turn ended: the person's next lines
    are messages (none is eaten by a prompt for the request), and the end of input denies
    the request, which nobody answered."""
    read, write = os.pipe()
    seen: list[str] = []

    async def on_message(message: InboundMessage) -> None:
        seen.append(message.text)

    with os.fdopen(read, "rb") as stdin:
        adapter = ConsoleAdapter(stdin=stdin, stdout=io.StringIO(), interactive=False)
        await adapter.start(on_message)
        await adapter.send(
            OutboundMessage(
                channel="console", chat_id="local", text="[writer]: ok?", actions=ACTIONS
            )
        )
        os.write(write, b"first\nsecond\nthird\n")
        os.close(write)
        async with asyncio.timeout(DEADLINE):
            await adapter.wait_closed()
        await adapter.stop()

    assert [text for text in seen if not text.startswith("/")] == ["first", "second", "third"]
    assert [text for text in seen if text.startswith("/")] == ["/deny k7m2pq"]


async def test_a_request_taken_back_is_answered_no_more_and_other_lines_cannot_be() -> None:
    read, write = os.pipe()
    seen: list[str] = []

    async def on_message(message: InboundMessage) -> None:
        seen.append(message.text)

    with os.fdopen(read, "rb") as stdin:
        adapter = ConsoleAdapter(stdin=stdin, stdout=io.StringIO(), interactive=False)
        await adapter.start(on_message)
        request = OutboundMessage(channel="console", chat_id="local", text="ok?", actions=ACTIONS)
        (sent,) = await adapter.send(request)
        assert sent.message_id is not None
        await adapter.delete(deletion(sent.message_id))
        with pytest.raises(DeliveryError):
            await adapter.delete(deletion("a printed line"))
        os.write(write, b"o\n")
        os.close(write)
        async with asyncio.timeout(DEADLINE):
            await adapter.wait_closed()
        await adapter.stop()

    assert seen == ["o"]  # a message, not an answer; and nothing left open to deny


def deletion(message_id: str) -> OutboundDeletion:
    return OutboundDeletion(channel="console", chat_id="local", message_id=message_id)
