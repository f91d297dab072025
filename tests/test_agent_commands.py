"""Switching models and agents with slash commands: answered at once, no model call."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from clawbot.agents.model_catalog import MAX_LINES, PER_PROVIDER
from clawbot.app import Clawbot
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ScriptedModel

from .conftest import Chat


@pytest.fixture
def other() -> Iterator[ScriptedModel]:
    model = ScriptedModel(name="other")
    with model.installed():
        yield model


@pytest.fixture(autouse=True)
def no_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which providers list their models depends on the keys present: none, unless set."""
    for name in list(os.environ):
        if name.endswith(("_API_KEY", "_TOKEN")):
            monkeypatch.delenv(name)


async def give_model(bot: Clawbot, agent_id: str, model: str) -> None:
    await bot.agents.update(bot.agents.get(agent_id).model_copy(update={"model": model}))


def known_models(bot: Clawbot, models: dict[str, list[str]]) -> None:
    """Make litellm's part of the catalog deterministic for a listing test."""
    bot.switchboard.catalog.known = lambda: models


async def test_agents_lists_every_agent_and_marks_the_active_one(
    chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await chat.say("/agent writer")
    await chat.say("/agents")

    lines = channel.texts[-1].splitlines()
    assert lines[0] == "Agents (switch with /agent <name|id>):"
    assert [line.split(" ")[1] for line in lines[1:]] == [
        "main",
        "coder",
        "coordinator",
        "researcher",
        "writer",
    ]
    assert [line[0] for line in lines[1:]] == ["•", "•", "•", "•", "▶"]
    assert scripted.requests == []


async def test_agents_mentions_agent_files_that_could_not_be_loaded(settings: Settings) -> None:
    settings.agents_dir.mkdir(parents=True)
    (settings.agents_dir / "broken.toml").write_text("name = \n")
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await bot.router.handle(channel.message("/agents"))

    assert "1 agent file(s) could not be loaded:" in channel.texts[0]
    assert "broken.toml: line 1, column 8: Invalid value" in channel.texts[0]


async def test_agent_switches_on_an_exact_id_and_the_next_turn_uses_its_model_and_tools(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel, other: ScriptedModel
) -> None:
    await give_model(bot, "coder", other.model_string)
    await chat.say("hello main")

    await chat.say("/agent coder")
    await chat.say("hello coder")

    assert channel.texts[1].startswith("Switched to coder: Writes, fixes and reviews code")
    assert f"Model: {other.model_string} (agent default)." in channel.texts[1]
    assert "session_set_agent" in scripted.requests[0].tool_names
    assert len(scripted.requests) == 1
    assert other.requests[0].model == other.name  # litellm hands the handler the bare name
    assert set(other.requests[0].tool_names) == {
        "file_read",
        "file_write",
        "file_edit",
        "list_dir",
        "send_file",
        "skill_read",
    }
    assert other.requests[0].last_user_text == "hello coder"


async def test_agent_matches_the_name_ignoring_case(bot: Clawbot, chat: Chat) -> None:
    await bot.agents.create(
        bot.agents.get("writer").model_copy(update={"agent_id": "poet", "name": "Verse Smith"})
    )

    await chat.say("/agent verse smith")

    assert (await bot.router.session_for(chat.channel.message("x"))).agent_id == "poet"


async def test_agent_near_miss_suggests_and_does_not_switch(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await chat.say("/agent codr")
    await chat.say("hello")

    assert channel.texts[0] == "No agent is called 'codr'; still main. Did you mean /agent coder?"
    assert "session_set_agent" in scripted.requests[0].tool_names
    session = await bot.router.session_for(channel.message("x"))
    assert session.agent_id == "main"


async def test_agent_without_a_match_points_to_the_list(chat: Chat, channel: MemoryChannel) -> None:
    await chat.say("/agent zzzzzz")

    assert channel.texts[0] == "No agent is called 'zzzzzz'; still main. /agents lists them."


async def test_agent_without_arguments_shows_the_current_one(
    chat: Chat, channel: MemoryChannel
) -> None:
    await chat.say("/agent")

    assert channel.texts[0].startswith("Agent: main. Switch with /agent <name|id>")


async def test_the_switch_survives_a_restart(settings: Settings, other: ScriptedModel) -> None:
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await bot.router.handle(channel.message("/agent researcher"))
        await bot.router.handle(channel.message("/model scripted/other"))

    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await bot.router.handle(channel.message("/status"))

    assert "Agent: researcher (researcher)" in channel.texts[0]
    assert "Model: scripted/other (session override)" in channel.texts[0]


async def test_model_shows_the_current_model_and_where_it_comes_from(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel, other: ScriptedModel
) -> None:
    await give_model(bot, "coder", other.model_string)

    await chat.say("/model")
    await chat.say("/agent coder")
    await chat.say("/model")

    assert channel.texts[0].startswith(f"Model: {scripted.model_string} (global default).")
    assert channel.texts[2].startswith(f"Model: {other.model_string} (agent default).")


async def test_model_sets_a_session_override_used_by_the_next_turn(
    chat: Chat, channel: MemoryChannel, scripted: ScriptedModel, other: ScriptedModel
) -> None:
    await chat.say("/model scripted/other")
    await chat.say("hi")
    await chat.say("/status")

    assert channel.texts[0] == "Model for this conversation: scripted/other (session override)."
    assert scripted.requests == []
    assert [r.model for r in other.requests] == [other.name]
    assert "Model: scripted/other (session override)" in channel.texts[-1]


async def test_model_default_clears_the_override(
    chat: Chat, channel: MemoryChannel, scripted: ScriptedModel, other: ScriptedModel
) -> None:
    await chat.say("/model scripted/other")
    await chat.say("/model default")
    await chat.say("hi")

    assert (
        channel.texts[1]
        == f"Cleared the override. Model: {scripted.model_string} (global default)."
    )
    assert len(scripted.requests) == 1
    assert other.requests == []


async def test_the_session_override_wins_over_the_agents_model(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel, other: ScriptedModel
) -> None:
    await give_model(bot, "coder", other.model_string)

    await chat.say(f"/model {scripted.model_string}")
    await chat.say("/agent coder")
    await chat.say("hi")

    assert len(scripted.requests) == 1
    assert other.requests == []


async def test_a_model_typo_gets_did_you_mean_and_changes_nothing(
    bot: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-000000")

    await chat.say("/model openai/gpt-4o-mnii")
    await chat.say("hi")

    assert channel.texts[0].startswith("Unknown model 'openai/gpt-4o-mnii'. Did you mean ")
    assert "openai/gpt-4o-mini" in channel.texts[0].split("Did you mean ")[1].split("?")[0]
    assert channel.texts[0].endswith(f"The model is still {scripted.model_string}.")
    assert scripted.requests[0].model == scripted.name


async def test_a_model_typo_suggests_each_model_once(
    bot: Clawbot, chat: Chat, channel: MemoryChannel
) -> None:
    await give_model(bot, "coder", "openai/gpt-4o-mini")
    known_models(bot, {"openai": ["openai/gpt-4o", "openai/gpt-4o-mini", "openai/gpt-4.1-mini"]})

    await chat.say("/model openai/gpt-4o-mni")

    assert channel.texts[0].startswith(
        "Unknown model 'openai/gpt-4o-mni'. "
        "Did you mean openai/gpt-4o-mini, openai/gpt-4.1-mini, openai/gpt-4o?"
    )


async def test_a_model_typo_suggests_models_of_the_provider_typed(
    bot: Clawbot, chat: Chat, channel: MemoryChannel
) -> None:
    known_models(
        bot,
        {
            "openai": ["openai/gpt-4o-mini", "openai/dall-e-3"],
            "azure": ["azure/gpt-4o-mini", "azure/gpt-4o-mini-2024"],
        },
    )

    await chat.say("/model openai/gpt-4o-mni")

    assert channel.texts[0].startswith(
        "Unknown model 'openai/gpt-4o-mni'. Did you mean openai/gpt-4o-mini?"
    )


async def test_a_provider_typo_gets_did_you_mean(chat: Chat, channel: MemoryChannel) -> None:
    await chat.say("/model opneai/gpt-4o")

    assert channel.texts[0].startswith("Unknown provider 'opneai'. Did you mean openai/gpt-4o")


async def test_a_model_without_provider_is_asked_for_in_full(
    chat: Chat, channel: MemoryChannel
) -> None:
    await chat.say("/model gpt-4o-mini")

    assert channel.texts[0].startswith(
        "Give the model as provider/model, e.g. scripted/test. Did you mean openai/gpt-4o-mini,"
    )


async def test_a_model_whose_provider_has_no_key_is_refused(
    chat: Chat, channel: MemoryChannel
) -> None:
    await chat.say("/model openai/gpt-4o")

    assert channel.texts[0] == (
        "No API key for openai: set OPENAI_API_KEY first. The model is still scripted/test."
    )


async def test_models_lists_configured_models_and_litellms_for_providers_with_keys(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-000000")
    await give_model(bot, "writer", "anthropic/claude-sonnet-4-5")

    await chat.say("/models")

    lines = channel.texts[0].splitlines()
    assert lines[0] == (
        "Models (current: scripted/test, global default); switch with /model <provider>/<model>:"
    )
    assert lines[1:3] == ["scripted/test", "anthropic/claude-sonnet-4-5"]
    openai = [line for line in lines if line.startswith("openai/")]
    assert len(openai) == PER_PROVIDER
    assert lines[3 + PER_PROVIDER].startswith("+ (")
    assert lines[3 + PER_PROVIDER].endswith("more) — /models openai")
    assert not any(line.startswith(("anthropic/claude-3", "gemini/")) for line in lines)


async def test_models_shows_the_first_models_of_a_big_provider_then_how_many_more(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BIGCO_API_KEY", "k")
    known_models(bot, {"bigco": [f"bigco/model-{n:03d}" for n in range(75)]})

    await chat.say("/models")

    lines = channel.texts[0].splitlines()
    assert lines[1:] == [
        "scripted/test",
        *(f"bigco/model-{n:03d}" for n in range(PER_PROVIDER)),
        f"+ ({75 - PER_PROVIDER} more) — /models bigco",
    ]


async def test_models_never_sends_more_than_sixty_lines(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = {f"p{n:02d}": [f"p{n:02d}/m{k}" for k in range(3)] for n in range(30)}
    for provider in models:
        monkeypatch.setenv(f"{provider.upper()}_API_KEY", "k")
    known_models(bot, models)

    await chat.say("/models")

    lines = channel.texts[0].splitlines()
    assert len(lines) == MAX_LINES
    # The header, scripted/test, then 19 providers of 3 models fill the 58 lines of the body.
    assert lines[1] == "scripted/test"
    assert lines[2:5] == ["p00/m0", "p00/m1", "p00/m2"]
    assert lines[-2] == "p18/m2"
    assert lines[-1] == (
        "+ (11 more providers: p19, p20, p21, p22, p23, p24, p25, p26, …) — /models <provider>"
    )


async def test_models_of_one_provider_lists_all_of_them_up_to_the_limit(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BIGCO_API_KEY", "k")
    known_models(bot, {"bigco": [f"bigco/model-{n:03d}" for n in range(75)]})

    await chat.say("/models bigco")
    await chat.say("/models bigco 07")

    lines = channel.texts[0].splitlines()
    assert len(lines) == MAX_LINES
    assert lines[1:3] == ["bigco/model-000", "bigco/model-001"]
    assert lines[-1] == (
        f"+ ({75 - (MAX_LINES - 2)} more) — /models bigco <part of a name> narrows it"
    )
    assert channel.texts[1].splitlines() == [
        "bigco models containing '07':",
        "bigco/model-007",
        "bigco/model-070",
        "bigco/model-071",
        "bigco/model-072",
        "bigco/model-073",
        "bigco/model-074",
    ]


async def test_models_of_a_provider_without_key_says_which_key_to_set(
    chat: Chat, channel: MemoryChannel
) -> None:
    await chat.say("/models anthropic")

    assert channel.texts[0].startswith("anthropic has ")
    assert channel.texts[0].endswith(
        "chat models, but no API key is set: set ANTHROPIC_API_KEY in the environment or .env "
        "and restart."
    )


async def test_models_of_a_misspelt_provider_suggests_the_right_one(
    chat: Chat, channel: MemoryChannel
) -> None:
    await chat.say("/models antropic")

    assert channel.texts[0] == (
        "No models known for provider 'antropic'. Did you mean anthropic? "
        "/models lists what is available."
    )


async def test_models_lists_only_chat_models(
    chat: Chat, channel: MemoryChannel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-000000")

    await chat.say("/models openai gpt-4o")

    models = channel.texts[0].splitlines()[1:]
    assert "openai/gpt-4o" in models
    assert "openai/gpt-4o-mini" in models
    assert not any("transcribe" in m or "tts" in m or "realtime" in m for m in models)


async def test_status_shows_the_agent_model_and_its_source(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, other: ScriptedModel
) -> None:
    await give_model(bot, "writer", other.model_string)

    await chat.say("/agent writer")
    await chat.say("/status")

    assert "Agent: writer (writer)" in channel.texts[-1]
    assert f"Model: {other.model_string} (agent default)" in channel.texts[-1]
    assert "Skills: plain-writing" in channel.texts[-1]


async def test_skills_lists_the_active_agents_skills(chat: Chat, channel: MemoryChannel) -> None:
    await chat.say("/agent researcher")
    await chat.say("/skills")
    await chat.say("/agent writer")
    await chat.say("/skills")

    assert channel.texts[1].splitlines() == [
        "Skills of researcher:",
        "• plain-writing — Write or edit text so it is clear, short and easy to act on.",
        "• research-brief — Answer a research question with a short, sourced brief saved to "
        "notes/.",
    ]
    assert channel.texts[3].splitlines() == [
        "Skills of writer:",
        "• plain-writing — Write or edit text so it is clear, short and easy to act on.",
    ]


async def test_context_shows_which_files_went_into_the_prompt(
    chat: Chat, channel: MemoryChannel
) -> None:
    await chat.say("/agent coder")
    await chat.say("/context")

    lines = channel.texts[-1].splitlines()
    assert lines[0] == "Agent: coder"
    files = [line[2:] for line in lines if line.startswith("• ")]
    assert files == [
        "agents/coder/IDENTITY.md",
        "agents/coder/SOUL.md",
        "AGENTS.md",
        "USER.md",
        "TOOLS.md",
    ]
    assert "Skills listed: code-review" in lines


@pytest.mark.parametrize(
    "command",
    [
        "/models",
        "/models scripted",
        "/model",
        "/model scripted/other",
        "/model default",
        "/agents",
        "/agent",
        "/agent writer",
        "/agent wrtier",
        "/skills",
        "/context",
    ],
)
async def test_every_agent_command_is_answered_without_a_model_call(
    chat: Chat, channel: MemoryChannel, scripted: ScriptedModel, command: str
) -> None:
    result = await chat.say(command)

    assert result.kind == "command"
    assert len(channel.texts) == 1 and channel.texts[0]
    assert scripted.requests == []
