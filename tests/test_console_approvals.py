"""`clawbot chat` answers approval requests on the next line: the turn that asked waits
for it before the chat reads on."""

from __future__ import annotations

import io
from pathlib import Path

from adapters.console import ConsoleAdapter, answer_command
from clawbot.app import Clawbot
from clawbot.messages import Action, InboundMessage
from clawbot.settings import Settings
from clawbot.testing import ScriptedModel, call

ACTIONS = (
    Action(label="Approve once", command="/approve k7m2pq once"),
    Action(label="Approve for this session", command="/approve k7m2pq session"),
    Action(label="Deny", command="/deny k7m2pq"),
)


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

        async def on_message(message: InboundMessage) -> None:
            await bot.router.handle(message)

        await adapter.start(on_message)
        await adapter.wait_closed()
        await bot.scheduler.wait_idle()
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


async def test_an_answer_that_means_nothing_is_asked_again(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    scripted.add(call("file_write", path="a.md", content="hi"), "Not written.")

    out = await chat(tmp_path, scripted, b"write a.md\nmaybe\nd\n")

    assert out.splitlines()[-2].startswith("Denied: file_write (")
    assert not (tmp_path / "home" / "workspace" / "a.md").exists()


async def test_the_end_of_input_denies_a_waiting_request(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    scripted.add(call("file_write", path="a.md", content="hi"), "Not written.")

    out = await chat(tmp_path, scripted, b"write a.md\n")

    assert out.splitlines()[-2].startswith("Denied: file_write (")
    assert out.splitlines()[-1] == "Not written."
