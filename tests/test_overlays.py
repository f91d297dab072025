"""Per-agent workspace overlays: workspace/agents/<id>/<FILE> replaces workspace/<FILE>."""

from __future__ import annotations

from clawbot.app import Clawbot
from clawbot.clock import ManualClock
from clawbot.testing import MemoryChannel, ScriptedModel, call
from clawbot.workspace import RECHECK_SECONDS

from .conftest import Chat


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
