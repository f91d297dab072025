"""Nobody is asked to approve a call that cannot run: a path outside the session's reach,
invalid arguments or a shell folder it may not use is refused at once, unasked, and the
model is told why."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clawbot.agents import ToolPolicy
from clawbot.app import Clawbot
from clawbot.testing import MemoryChannel, ScriptedModel, call

from .conftest import add_agent
from .test_approvals import is_request, supervised, writes


@pytest.fixture
async def bot(tmp_path: Path, scripted: ScriptedModel) -> AsyncIterator[Clawbot]:
    async with await Clawbot.open(supervised(tmp_path, scripted)) as opened:
        opened.connect(MemoryChannel())
        await add_agent(
            opened,
            "coder",
            model=scripted.model_string,
            tools=ToolPolicy(allow=("file_read", "file_write", "file_edit", "shell_exec")),
        )
        yield opened


@pytest.fixture
async def coder_chat(bot: Clawbot) -> MemoryChannel:
    channel = bot.outbox.adapter("memory")
    assert isinstance(channel, MemoryChannel)
    session = await bot.router.session_for(channel.message("x"))
    await bot.router.update_session(session, agent_id="coder")
    return channel


async def test_a_write_outside_the_agents_folder_is_refused_without_asking(
    bot: Clawbot, coder_chat: MemoryChannel, scripted: ScriptedModel, tmp_path: Path
) -> None:
    scripted.add(writes("plan.md"), "I may not write there.")

    await bot.router.handle(coder_chat.message("make a plan"))
    await bot.scheduler.wait_idle()

    assert not any(is_request(m) for m in coder_chat.sent)
    assert coder_chat.texts == ["I may not write there."]
    result = scripted.requests[1].tool_results[0]
    assert result.startswith("error: not run: plan.md is outside this session's reach")
    assert not (tmp_path / "home" / "workspace" / "plan.md").exists()
    (record,) = [r for r in await bot.store.audit.tail(10) if r.tool == "file_write"]
    assert record.status == "refused" and not record.approval_required


async def test_a_write_inside_the_agents_folder_is_still_asked(
    bot: Clawbot, coder_chat: MemoryChannel, scripted: ScriptedModel
) -> None:
    scripted.add(writes("agents/coder/plan.md"), "Written.")

    await bot.router.receive(coder_chat.message("make a plan"))
    request = await coder_chat.sent_when(is_request)

    assert "file_write" in request.text and "agents/coder/plan.md" in request.text


async def test_invalid_arguments_are_refused_without_asking(
    bot: Clawbot, coder_chat: MemoryChannel, scripted: ScriptedModel
) -> None:
    scripted.add(call("file_write", path="agents/coder/plan.md"), "I forgot the content.")

    await bot.router.handle(coder_chat.message("make a plan"))
    await bot.scheduler.wait_idle()

    assert not any(is_request(m) for m in coder_chat.sent)
    assert "content: Field required" in scripted.requests[1].tool_results[0]


async def test_a_shell_command_in_a_folder_out_of_reach_is_refused_without_asking(
    bot: Clawbot, coder_chat: MemoryChannel, scripted: ScriptedModel
) -> None:
    scripted.add(call("shell_exec", command="ls", cwd="."), "Not there.")

    await bot.router.handle(coder_chat.message("list the workspace"))
    await bot.scheduler.wait_idle()

    assert not any(is_request(m) for m in coder_chat.sent)
    assert scripted.requests[1].tool_results[0].startswith("error: not run: ")
