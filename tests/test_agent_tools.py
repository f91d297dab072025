"""Switching and managing agents by natural language: tools the model calls."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from clawbot.agents.files import read_agent_file
from clawbot.app import Clawbot, default_tools
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel, Step, call
from clawbot.tools.registry import ToolContext, make_tool

from .conftest import Chat


@pytest.fixture
def other() -> Iterator[ScriptedModel]:
    model = ScriptedModel(name="other")
    with model.installed():
        yield model


async def give_model(bot: Clawbot, agent_id: str, model: str) -> None:
    await bot.agents.update(bot.agents.get(agent_id).model_copy(update={"model": model}))


async def session_agent(bot: Clawbot) -> str:
    return (await bot.router.session_for(MemoryChannel().message("x"))).agent_id


COMPLETE_DRAFT = {
    "name": "Translator",
    "description": "Translates text between languages.",
    "system_prompt": "Translate what the user sends; keep the tone.",
    "tools": {"allow": ["file_read"]},
}


async def test_session_set_agent_switches_and_the_next_turn_uses_the_new_agent(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel, other: ScriptedModel
) -> None:
    await give_model(bot, "coder", other.model_string)
    scripted.add(call("session_set_agent", agent="the coder"), "Handing you to the coder.")
    other.add("Coder here.")

    await chat.say("let the coder take over")
    await chat.say("fix my script")

    assert (
        scripted.requests[1]
        .tool_results[0]
        .startswith("Switched this conversation to coder (coder).")
    )
    assert channel.texts == ["Handing you to the coder.", "Coder here."]
    assert len(scripted.requests) == 2
    assert other.requests[0].model == other.name
    assert set(other.requests[0].tool_names) == {
        "file_read",
        "file_write",
        "file_edit",
        "list_dir",
        "send_file",
        "skill_read",
    }
    assert "You are the coder" in other.requests[0].system
    assert await session_agent(bot) == "coder"


async def test_session_set_agent_asks_back_when_the_name_could_mean_several(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    await bot.agents.create(
        bot.agents.get("writer").model_copy(update={"agent_id": "writer2", "name": "writer two"})
    )
    scripted.add(call("session_set_agent", agent="writ"), "Which writer?")

    await chat.say("switch to the writer")

    result = scripted.requests[1].tool_results[0]
    assert result.startswith("error: 'writ' could mean several agents: writer (writer), writer2")
    assert "ask the user which one" in result
    assert await session_agent(bot) == "main"


async def test_session_set_model_switches_the_model_of_the_next_turn(
    chat: Chat, scripted: ScriptedModel, other: ScriptedModel
) -> None:
    scripted.add(call("session_set_model", model_ref="scripted/other"), "Switched.")
    other.add("Other model here.")

    await chat.say("use the other model")
    await chat.say("hello")

    assert (
        scripted.requests[1]
        .tool_results[0]
        .startswith("This conversation now uses scripted/other.")
    )
    assert [r.last_user_text for r in other.requests] == ["hello"]


async def test_session_set_model_refuses_a_typo_with_suggestions(
    chat: Chat, scripted: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-000000")
    scripted.add(call("session_set_model", model_ref="openai/gpt-4o-mnii"), "Hm.")

    await chat.say("use gpt-4o-mini")
    await chat.say("hello")

    result = scripted.requests[1].tool_results[0]
    assert result.startswith("error: Unknown model 'openai/gpt-4o-mnii'. Did you mean")
    assert "openai/gpt-4o-mini" in result
    assert len(scripted.requests) == 3


async def test_models_list_and_agents_list_describe_the_choices(
    chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add([call("models_list"), call("agents_list")], "Here they are.")

    await chat.say("what can I use?")

    models, agents = scripted.requests[1].tool_results
    assert models.splitlines()[1] == "scripted/test"
    assert agents.splitlines()[0] == (
        "- main: main — The default general-purpose assistant; can switch models and agents "
        "and create agents. (scripted/test (global)) [active]"
    )
    assert len(agents.splitlines()) == 5


async def test_agent_create_reports_what_is_missing_then_creates_from_the_complete_draft(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    scripted.add(
        call("agent_create", draft={"name": "Translator"}),
        "What should it do, and how should it behave?",
        call("agent_create", draft=COMPLETE_DRAFT),
        "Created the translator.",
    )

    await chat.say("make me a translator agent")
    incomplete = scripted.requests[1].tool_results[0]
    stored_before = [r.spec.agent_id for r in await bot.store.agents.list()]
    await chat.say("it translates; it should keep the tone")
    await chat.say("/agent translator")
    await chat.say("bonjour")

    assert incomplete.startswith("error: nothing was saved — missing: description (")
    assert "system_prompt (" in incomplete
    assert "ask the user" in incomplete
    assert "translator" not in stored_before
    assert (
        scripted.requests[3].tool_results[-1].startswith("Created agent translator (Translator).")
    )
    assert channel.texts[2].startswith("Switched to Translator (translator)")
    assert scripted.requests[-1].tool_names == ["file_read"]
    assert scripted.requests[-1].system.startswith("Translate what the user sends; keep the tone.")
    stored = {r.spec.agent_id: r for r in await bot.store.agents.list()}
    assert stored["translator"].source == "chat"


async def test_agent_create_names_wrong_fields_and_writes_nothing(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    draft = {**COMPLETE_DRAFT, "temperature": 5, "colour": "red", "model": "opneai/gpt-4o"}
    scripted.add(call("agent_create", draft=draft), "Let me ask.")

    await chat.say("make a translator")

    result = scripted.requests[1].tool_results[0]
    assert "wrong: temperature: Input should be less than or equal to 2" in result
    assert "colour: not an agent setting" in result
    assert bot.agents.find("translator") is None
    assert "translator" not in [r.spec.agent_id for r in await bot.store.agents.list()]


async def test_agent_create_asks_for_an_id_when_none_can_be_made_from_the_name(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(call("agent_create", draft={**COMPLETE_DRAFT, "name": "翻译"}), "Which id?")

    await chat.say("make a translator called 翻译")

    result = scripted.requests[1].tool_results[0]
    assert result.startswith("error: nothing was saved — missing: agent_id (a short id: ")
    assert "wrong:" not in result


async def test_agent_create_checks_the_model(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(call("agent_create", draft={**COMPLETE_DRAFT, "model": "opneai/gpt-4o"}), "Hm.")

    await chat.say("make a translator on gpt-4o")

    result = scripted.requests[1].tool_results[0]
    assert "wrong: model: Unknown provider 'opneai'. Did you mean openai/gpt-4o" in result
    assert bot.agents.find("translator") is None


async def test_agent_create_refuses_a_name_that_is_taken(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(call("agent_create", draft={**COMPLETE_DRAFT, "name": "Coder"}), "Hm.")

    await chat.say("make another coder")

    result = scripted.requests[1].tool_results[0]
    assert "name: 'Coder' is already used by agent 'coder'" in result
    assert "agent_id: 'coder' already exists (use agent_update to change it)" in result


async def test_an_agent_cannot_grant_a_high_risk_tool_it_does_not_hold(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    maker = bot.agents.get("coordinator").model_copy(
        update={
            "tools": bot.agents.get("coordinator").tools.model_copy(
                update={"allow": ("agent_create", "session_set_agent")}
            )
        }
    )
    await bot.agents.update(maker)
    draft = {**COMPLETE_DRAFT, "tools": {"allow": ["session_set_model", "file_read"]}}
    scripted.add(call("agent_create", draft=draft), "Could not.")

    await chat.say("/agent coordinator")
    await chat.say("make an agent that can switch models")

    result = scripted.requests[1].tool_results[0]
    assert "tools: you cannot grant session_set_model, which you do not have yourself" in result
    assert bot.agents.find("translator") is None


async def test_agent_update_changes_the_agent_from_the_next_turn(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel, other: ScriptedModel
) -> None:
    patch = {"model": other.model_string, "tools": {"deny": ["file_write", "file_edit"]}}
    scripted.add(call("agent_update", agent="coder", patch=patch), "Updated.")

    await chat.say("make the coder read-only and use the other model")
    await chat.say("/agent coder")
    await chat.say("hello")

    assert scripted.requests[1].tool_results[0] == (
        "Updated coder: model, tools. It takes effect from the next message."
    )
    coder = bot.agents.get("coder")
    assert coder.tools.allow == ("group:files", "skill_read")
    assert set(other.requests[0].tool_names) == {
        "file_read",
        "list_dir",
        "send_file",
        "skill_read",
    }


async def test_agent_update_cannot_change_an_agents_id(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(call("agent_update", agent="coder", patch={"agent_id": "dev"}), "No.")

    await chat.say("rename coder's id")

    assert "agent_id: an agent's id cannot change" in scripted.requests[1].tool_results[0]
    assert bot.agents.find("dev") is None


async def test_agent_update_of_an_unknown_agent_suggests_names(
    chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(call("agent_update", agent="codr", patch={"temperature": 0}), "No.")

    await chat.say("cool the coder down")

    assert scripted.requests[1].tool_results[0] == (
        "error: no agent is called 'codr' — did you mean coder?"
    )


async def test_a_created_agent_is_exported_with_the_others(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel, tmp_path: Path
) -> None:
    scripted.add(call("agent_create", draft=COMPLETE_DRAFT), "Done.")
    await chat.say("make a translator")

    await bot.agents.export(tmp_path / "out")

    assert read_agent_file(tmp_path / "out" / "translator.toml").spec == bot.agents.get(
        "translator"
    )


# policy -----------------------------------------------------------------------------


async def test_high_risk_tools_are_denied_to_other_agents_unless_named(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    everything = bot.agents.get("writer").model_copy(update={"agent_id": "broad", "name": "broad"})
    everything = everything.model_copy(
        update={"tools": everything.tools.model_copy(update={"allow": ("*", "group:sessions")})}
    )
    named = everything.model_copy(
        update={
            "agent_id": "named",
            "name": "named",
            "tools": everything.tools.model_copy(update={"allow": ("*", "session_set_agent")}),
        }
    )
    await bot.agents.create(everything)
    await bot.agents.create(named)

    for agent in ("broad", "named"):
        await chat.say(f"/agent {agent}")
        await chat.say("hi")

    broad, named_tools = (set(r.tool_names) for r in scripted.requests)
    high_risk = {"session_set_agent", "session_set_model", "agent_create", "agent_update"}
    assert broad & high_risk == set()
    assert {"models_list", "agents_list", "file_write"} <= broad
    assert named_tools & high_risk == {"session_set_agent"}


async def test_deny_wins_even_for_main(bot: Clawbot, chat: Chat, scripted: ScriptedModel) -> None:
    main = bot.agents.get("main")
    await bot.agents.update(
        main.model_copy(update={"tools": main.tools.model_copy(update={"deny": ("group:agents",)})})
    )

    await chat.say("hi")

    assert "agent_create" not in scripted.requests[0].tool_names
    assert "session_set_agent" in scripted.requests[0].tool_names


async def test_a_tool_outside_the_policy_is_not_offered_and_never_runs_when_called(
    settings: Settings, scripted: ScriptedModel
) -> None:
    launched: list[str] = []

    async def launch_rocket(target: str, ctx: ToolContext) -> str:
        """Launch the rocket."""
        launched.append(target)
        return "launched"

    tools = default_tools()
    tools.add(make_tool(launch_rocket, risk="unsafe"))
    async with await Clawbot.open(settings, tools=tools) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        scripted.add("ok", call("launch_rocket", target="moon"), "It did not work.")
        await bot.router.handle(channel.message("hi"))
        await bot.router.handle(channel.message("/agent writer"))
        await bot.router.handle(channel.message("launch it anyway"))

    assert "launch_rocket" in scripted.requests[0].tool_names
    assert "launch_rocket" not in scripted.requests[1].tool_names
    assert scripted.requests[2].tool_results[0] == (
        "error: tool 'launch_rocket' is not available to this agent"
    )
    assert launched == []


async def test_a_switch_by_a_tool_keeps_a_model_change_made_while_the_turn_ran(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def reply(request: ModelRequest) -> Step:
        if len(scripted.requests) == 1:
            entered.set()
            await release.wait()
            return call("session_set_agent", agent="coder")
        return "Switched."

    scripted.function = reply
    turn = asyncio.create_task(chat.say("hand me to the coder"))
    await entered.wait()
    await chat.say("/model scripted/other")
    release.set()
    await turn

    session = await bot.router.session_for(MemoryChannel().message("x"))
    assert (session.agent_id, session.model_override) == ("coder", "scripted/other")
    stored = await bot.store.sessions.get(session.key)
    assert stored is not None
    assert (stored.agent_id, stored.model_override) == ("coder", "scripted/other")
