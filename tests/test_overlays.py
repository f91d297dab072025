"""Per-agent workspace overlays: workspace/agents/<id>/<FILE> replaces workspace/<FILE>."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from clawbot.agents.workspace import RECHECK_SECONDS
from clawbot.app import Clawbot
from clawbot.clock import ManualClock
from clawbot.testing import MemoryChannel, ScriptedModel, call

from .conftest import Chat
from .test_file_tools import STALL_LIMIT, open_both_ends


async def test_an_agents_overlay_file_replaces_the_root_file_and_the_rest_fall_back(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    root = bot.workspace.root
    (root / "SOUL.md").write_text("Root soul.")
    (root / "AGENTS.md").write_text("Root agreement.")
    (root / "agents" / "coder" / "SOUL.md").write_text("Coder soul.")

    await chat.say("/agent coder")
    await chat.say("hi")

    system = scripted.requests[0].system
    assert "Coder soul." in system
    assert "Root soul." not in system
    assert "Root agreement." in system


async def test_an_agent_without_overlays_uses_the_root_files(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    (bot.workspace.root / "SOUL.md").write_text("Root soul.")

    await chat.say("hi")

    assert "Root soul." in scripted.requests[0].system
    assert "You are the coder" not in scripted.requests[0].system


async def test_an_agent_with_overlays_turned_off_ignores_them(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    (bot.workspace.root / "SOUL.md").write_text("Root soul.")
    coder = bot.agents.get("coder")
    await bot.agents.update(coder.model_copy(update={"workspace_overlay": False}))

    await chat.say("/agent coder")
    await chat.say("hi")

    system = scripted.requests[0].system
    assert "Root soul." in system
    assert "You are the coder" not in system


async def test_every_shipped_specialist_has_a_persona_overlay(
    bot: Clawbot, channel: MemoryChannel
) -> None:
    for agent in ("coordinator", "researcher", "coder", "writer"):
        await bot.router.handle(channel.message(f"/agent {agent}"))
        await bot.router.handle(channel.message("/context"))

        files = [line[2:] for line in channel.texts[-1].splitlines() if line.startswith("• ")]
        assert f"agents/{agent}/IDENTITY.md" in files
        assert f"agents/{agent}/SOUL.md" in files


async def test_bootstrap_files_added_edited_and_removed_by_a_person_take_effect_within_a_second(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    clock = bot.workspace.clock = ManualClock()
    root = bot.workspace.root
    (root / "USER.md").write_text("Root user notes.")
    await chat.say("one")
    overlay = root / "agents" / "main" / "USER.md"
    overlay.parent.mkdir(parents=True, exist_ok=True)
    overlay.write_text("The user likes tea.")
    await chat.say("same second")
    clock.advance(RECHECK_SECONDS)
    await chat.say("two")
    overlay.write_text("The user likes coffee, and a longer note.")
    clock.advance(RECHECK_SECONDS)
    await chat.say("three")
    overlay.unlink()
    (root / "USER.md").unlink()
    clock.advance(RECHECK_SECONDS)
    await chat.say("four")

    systems = [request.system for request in scripted.requests]
    assert "Root user notes." in systems[0] and "likes tea" not in systems[0]
    assert systems[1] == systems[0]
    assert "The user likes tea." in systems[2] and "Root user notes." not in systems[2]
    assert "likes coffee" in systems[3] and "likes tea" not in systems[3]
    assert "likes coffee" not in systems[4] and "Root user notes." not in systems[4]


async def test_a_bootstrap_file_the_agent_writes_takes_effect_at_its_next_turn(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    bot.workspace.clock = ManualClock()
    await chat.say("hello")
    scripted.add(call("file_write", path="USER.md", content="The user is called Ada."), "Noted.")
    await chat.say("my name is Ada, remember it")
    await chat.say("who am I?")

    assert "The user is called Ada." not in scripted.requests[0].system
    assert "The user is called Ada." in scripted.requests[-1].system


async def test_an_overlay_linking_to_a_file_outside_the_workspace_is_left_out(
    bot: Clawbot,
    chat: Chat,
    scripted: ScriptedModel,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An agent's shell may make a link in its own folder; its next system prompt must not
    carry the host's file it names."""
    (tmp_path / "host-secret.txt").write_text("the host's secret")
    (bot.workspace.root / "SOUL.md").write_text("Root soul.")
    overlay = bot.workspace.root / "agents" / "coder" / "SOUL.md"
    overlay.unlink()  # the shipped one
    os.symlink(tmp_path / "host-secret.txt", overlay)

    await chat.say("/agent coder")
    await chat.say("hi")
    bot.workspace.changed()
    await chat.say("again")

    system = scripted.requests[0].system
    assert "the host's secret" not in system
    assert "Root soul." in system
    said = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert said == [
        "bootstrap file agents/coder/SOUL.md left out: it leads outside the workspace "
        "(through a link); copy the file into the workspace instead"
    ]


async def test_an_overlay_linking_to_a_file_inside_the_workspace_is_read(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    (bot.workspace.root / "shared-soul.md").write_text("Shared soul.")
    overlay = bot.workspace.root / "agents" / "coder" / "SOUL.md"
    overlay.unlink()  # the shipped one
    os.symlink("../../shared-soul.md", overlay)

    await chat.say("/agent coder")
    await chat.say("hi")

    assert "Shared soul." in scripted.requests[0].system


async def test_a_named_pipe_as_a_bootstrap_file_is_skipped_not_waited_on(bot: Clawbot) -> None:
    pipe = bot.workspace.root / "USER.md"
    pipe.unlink()  # the shipped one
    os.mkfifo(pipe)
    (bot.workspace.root / "SOUL.md").write_text("Root soul.")

    reading = asyncio.create_task(asyncio.to_thread(bot.workspace.bootstrap))
    done, _ = await asyncio.wait({reading}, timeout=STALL_LIMIT)
    if not done:  # stuck opening the pipe: free it, then fail
        os.close(open_both_ends(pipe))
        await reading
        pytest.fail(f"the bootstrap files waited {STALL_LIMIT:.0f} s for the pipe's writer")

    names = [file.name for file in reading.result()]
    assert "SOUL.md" in names
    assert "USER.md" not in names
