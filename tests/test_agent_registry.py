"""The agent registry: the agent_specs table, seeded and updated from agents/*.toml."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from clawbot.agents.files import agent_toml, read_agent_file
from clawbot.agents.profiles import AgentSpec, ContextPolicy
from clawbot.agents.registry import AgentRegistry
from clawbot.app import Clawbot
from clawbot.errors import ConfigError
from clawbot.policies import ToolPolicy
from clawbot.settings import Settings
from clawbot.store import SqliteStore, Store

SHIPPED = Path(__file__).resolve().parent.parent / "agents"


@pytest.fixture
def store(each_store: Store) -> Store:
    """The registry's tests that take a store run on each backend: SQLite and PostgreSQL."""
    return each_store


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "agents"
    path.mkdir()
    return path


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


FULL_SPEC = AgentSpec(
    agent_id="translator",
    name="Translator",
    description='Translates "anything" — even émojis 🎉',
    model="scripted/other",
    temperature=0.4,
    system_prompt="You translate.\nKeep the tone.\n\tIndented line with 'quotes' and \\ slash.\n",
    tools=ToolPolicy(allow=("group:files", "skill_*"), deny=("file_edit",)),
    skills=ToolPolicy(allow=("plain-writing",), deny=()),
    context=ContextPolicy(memory_recall=True, max_history_messages=12),
    workspace_overlay=False,
    risk_profile="strict",
)


async def test_the_shipped_agents_all_load_without_problems(store: Store) -> None:
    registry = await AgentRegistry.open(store, SHIPPED)

    assert registry.problems == ()
    assert [spec.agent_id for spec in registry.all()] == [
        "main",
        "coder",
        "coordinator",
        "researcher",
        "writer",
    ]


async def test_agents_are_stored_in_the_database_and_survive_a_restart(
    tmp_path: Path, folder: Path
) -> None:
    store = await SqliteStore.open(tmp_path / "a.db")
    registry = await AgentRegistry.open(store, folder)
    await registry.create(FULL_SPEC)
    await store.close()

    store = await SqliteStore.open(tmp_path / "a.db")
    reopened = await AgentRegistry.open(store, folder)
    await store.close()

    assert reopened.find("translator") == FULL_SPEC
    assert reopened.record("translator").source == "chat"  # type: ignore[union-attr]


async def test_main_exists_even_without_any_agent_file(store: Store, folder: Path) -> None:
    registry = await AgentRegistry.open(store, folder)

    assert [spec.agent_id for spec in registry.all()] == ["main"]
    assert registry.get("no-such-agent").agent_id == "main"


async def test_an_update_replaces_the_stored_spec(store: Store, folder: Path) -> None:
    registry = await AgentRegistry.open(store, folder)
    await registry.create(FULL_SPEC)

    await registry.update(FULL_SPEC.model_copy(update={"temperature": 1.5}))

    stored = {r.spec.agent_id: r.spec for r in await store.agents.list()}
    assert stored["translator"].temperature == 1.5
    assert registry.get("translator").temperature == 1.5


def test_toml_round_trip_keeps_every_field(tmp_path: Path) -> None:
    path = tmp_path / "translator.toml"
    path.write_text(agent_toml(FULL_SPEC))

    assert read_agent_file(path).spec == FULL_SPEC


def test_a_prompt_with_control_characters_round_trips_as_a_basic_string(tmp_path: Path) -> None:
    spec = AgentSpec(agent_id="odd", name="odd", system_prompt="bell\a\r\nend'''\x7f'")
    path = tmp_path / "odd.toml"
    path.write_text(agent_toml(spec))

    assert read_agent_file(path).spec == spec


def test_a_multi_line_prompt_is_exported_readably(tmp_path: Path) -> None:
    text = agent_toml(FULL_SPEC.model_copy(update={"system_prompt": "Line one.\nLine two.\n"}))

    assert "system_prompt = '''\nLine one.\nLine two.\n'''" in text
    assert tomllib.loads(text)["system_prompt"] == "Line one.\nLine two.\n"


async def test_export_writes_one_file_per_agent_that_loads_back_the_same(
    store: Store, tmp_path: Path
) -> None:
    registry = await AgentRegistry.open(store, SHIPPED)
    await registry.create(FULL_SPEC)
    target = tmp_path / "exported"

    paths = await registry.export(target)

    assert sorted(p.name for p in paths) == [
        "coder.toml",
        "coordinator.toml",
        "main.toml",
        "researcher.toml",
        "translator.toml",
        "writer.toml",
    ]
    for spec in registry.all():
        assert read_agent_file(target / f"{spec.agent_id}.toml").spec == spec


async def test_a_broken_file_is_reported_by_name_and_line_and_the_others_still_load(
    store: Store, folder: Path
) -> None:
    write(folder, "good.toml", 'agent_id = "good"\nname = "Good"\n')
    write(folder, "broken.toml", 'agent_id = "broken"\nname = "Broken"\n[tools\nallow = []\n')

    registry = await AgentRegistry.open(store, folder)

    assert registry.find("good") is not None
    assert registry.find("broken") is None
    assert len(registry.problems) == 1
    assert registry.problems[0].startswith(
        "broken.toml: line 3, column 7: Expected ']' at the end of a table declaration"
    )


async def test_an_unterminated_string_is_reported_at_the_end_of_the_file(
    store: Store, folder: Path
) -> None:
    write(folder, "open.toml", 'agent_id = "open"\nname = "Open\n')

    registry = await AgentRegistry.open(store, folder)

    assert registry.problems[0].startswith("open.toml: line 2, column ")


async def test_an_invalid_value_names_the_field_and_its_line(store: Store, folder: Path) -> None:
    write(
        folder,
        "hot.toml",
        'agent_id = "hot"\nname = "Hot"\n\n[tools]\nallow = ["*"]\n\n'
        "[context]\nmax_history_messages = 1\n",
    )
    write(folder, "warm.toml", 'name = "Warm"\ntemperature = 5\ncolour = "red"\n')

    registry = await AgentRegistry.open(store, folder)

    hot, warm = sorted(registry.problems)
    assert hot.startswith(
        "hot.toml: line 8: context.max_history_messages: Input should be greater than or equal to 2"
    )
    assert "warm.toml: line 2: temperature: Input should be less than or equal to 2" in warm
    assert "line 3: colour: not an agent setting" in warm
    assert registry.find("hot") is None


async def test_a_model_without_provider_is_explained(store: Store, folder: Path) -> None:
    write(folder, "bare.toml", 'name = "Bare"\nmodel = "gpt-4o"\n')

    registry = await AgentRegistry.open(store, folder)

    assert registry.problems[0].startswith(
        "bare.toml: line 2: model: write it as provider/model, e.g. openai/gpt-4o-mini"
    )


async def test_an_agent_id_that_differs_from_the_file_name_is_reported(
    store: Store, folder: Path
) -> None:
    write(folder, "alpha.toml", 'agent_id = "beta"\nname = "Beta"\n')

    registry = await AgentRegistry.open(store, folder)

    assert registry.find("beta") is None
    assert registry.problems[0].startswith(
        "alpha.toml: line 1: agent_id 'beta' does not match the file name"
    )


async def test_two_files_cannot_share_a_name(store: Store, folder: Path) -> None:
    write(folder, "one.toml", 'name = "Twin"\n')
    write(folder, "two.toml", 'name = "twin"\n')

    registry = await AgentRegistry.open(store, folder)

    assert registry.find("one") is not None
    assert registry.find("two") is None
    assert registry.problems == (
        "two.toml: name 'twin' is already used by agent 'one' — give one of them another name",
    )


async def test_an_edited_file_updates_the_registry_at_the_next_start(
    tmp_path: Path, folder: Path
) -> None:
    path = write(folder, "helper.toml", 'name = "Helper"\ndescription = "first"\n')
    store = await SqliteStore.open(tmp_path / "a.db")
    await AgentRegistry.open(store, folder)
    path.write_text('name = "Helper"\ndescription = "second"\n')

    registry = await AgentRegistry.open(store, folder)
    await store.close()

    assert registry.get("helper").description == "second"


async def test_a_change_from_chat_survives_a_restart_until_the_file_is_edited(
    tmp_path: Path, folder: Path
) -> None:
    path = write(folder, "helper.toml", 'name = "Helper"\ndescription = "from the file"\n')
    store = await SqliteStore.open(tmp_path / "a.db")
    registry = await AgentRegistry.open(store, folder)
    await registry.update(registry.get("helper").model_copy(update={"description": "from chat"}))

    after_restart = await AgentRegistry.open(store, folder)
    path.write_text('name = "Helper"\ndescription = "edited file"\n')
    after_edit = await AgentRegistry.open(store, folder)
    await store.close()

    assert after_restart.get("helper").description == "from chat"
    assert after_edit.get("helper").description == "edited file"


async def test_exporting_into_the_agents_folder_is_not_mistaken_for_an_edit(
    tmp_path: Path, folder: Path
) -> None:
    store = await SqliteStore.open(tmp_path / "a.db")
    registry = await AgentRegistry.open(store, folder)
    await registry.create(FULL_SPEC)
    await registry.export(folder)
    await registry.update(FULL_SPEC.model_copy(update={"description": "changed after export"}))

    reopened = await AgentRegistry.open(store, folder)
    await store.close()

    assert reopened.get("translator").description == "changed after export"


async def test_an_unknown_default_agent_setting_is_a_clear_error(settings: Settings) -> None:
    settings = settings.model_copy(update={"agent": "ghost"})

    with pytest.raises(ConfigError, match=r"CLAWBOT_AGENT names an unknown agent 'ghost'"):
        await Clawbot.open(settings)


async def test_new_sessions_start_with_the_configured_default_agent(settings: Settings) -> None:
    from clawbot.testing import MemoryChannel

    settings = settings.model_copy(update={"agent": "writer"})
    async with await Clawbot.open(settings) as bot:
        session = await bot.router.session_for(MemoryChannel().message("hi"))

    assert session.agent_id == "writer"
