"""Every agent but ``main`` reaches only its own folder ``agents/<id>/`` of the workspace, plus
the sibling folders its profile grants; a child reaches its own folder within its parent's
reach; the shell's working folder, the paths it names and its sandbox follow the same
boundary."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from clawbot.agents.files import agent_toml, read_agent_file
from clawbot.agents.profiles import AgentSpec, SiblingAccess, SubagentPolicy
from clawbot.app import Clawbot
from clawbot.policies import ToolPolicy
from clawbot.routing.sessions import Session
from clawbot.security.reach import Reach, Root
from clawbot.subagents.scratchpad import folder_of
from clawbot.testing import MemoryChannel, ScriptedModel, call

from .conftest import Chat, add_agent
from .test_shell_tool import needs_bwrap

FILES = ToolPolicy(allow=("file_read", "file_write", "file_edit", "list_dir"))
READS = ToolPolicy(allow=("file_read", "list_dir"))
SHELL = ToolPolicy(allow=("file_read", "file_write", "list_dir", "shell_exec"))


async def talk_to(
    bot: Clawbot,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    agent_id: str,
    *,
    tools: ToolPolicy = FILES,
    siblings: dict[str, SiblingAccess] | None = None,
) -> None:
    """The chat's agent becomes ``agent_id``, running on the scripted model."""
    await add_agent(
        bot, agent_id, model=scripted.model_string, tools=tools, siblings=siblings or {}
    )
    session = await bot.router.session_for(channel.message("x"))
    await bot.router.update_session(session, agent_id=agent_id)


def hidden(text: str) -> str:
    """A shell expression that prints ``text`` without spelling it (past the text checks:
    the sandbox is what holds then)."""
    return f'"$(echo {base64.b64encode(text.encode()).decode()} | base64 -d)"'


def result_of(scripted: ScriptedModel) -> str:
    (result,) = scripted.requests[1].tool_results
    return result


# a non-main agent's own folder ------------------------------------------------------------


async def test_an_agents_file_tools_reach_its_own_folder_and_nothing_else(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    (bot.workspace.root / "notes.md").write_text("the operator's")
    await talk_to(bot, channel, scripted, "builder")
    scripted.add(
        [
            call("file_write", path="agents/builder/plan.md", content="p"),
            call("file_read", path="notes.md"),
        ],
        "Done.",
    )

    await chat.say("write the plan")

    written, refused = scripted.requests[1].tool_results
    assert written == "wrote 1 characters to agents/builder/plan.md"
    assert (bot.workspace.root / "agents" / "builder" / "plan.md").read_text() == "p"
    assert refused.startswith(
        "error: notes.md is outside this session's reach "
        "(its reach: agents/builder (read and write))"
    )


async def test_an_agent_may_not_write_beside_its_own_folder(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await talk_to(bot, channel, scripted, "builder")
    scripted.add(call("file_write", path="agents/builderx/a.md", content="x"), "Refused.")

    await chat.say("write")

    assert "outside this session's reach" in result_of(scripted)
    assert not (bot.workspace.root / "agents" / "builderx").exists()


async def test_an_agents_folder_exists_from_its_first_call(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await talk_to(bot, channel, scripted, "builder", tools=READS)
    scripted.add(call("list_dir", path="agents/builder"), "Empty.")

    await chat.say("what is there?")

    assert result_of(scripted) == "(empty folder)"


# siblings ---------------------------------------------------------------------------------


async def test_a_sibling_granted_read_is_read_but_not_written(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    folder = bot.workspace.root / "agents" / "scribe"
    folder.mkdir(parents=True)
    (folder / "draft.md").write_text("the draft")
    await talk_to(bot, channel, scripted, "builder", siblings={"scribe": "read"})
    scripted.add(
        [
            call("file_read", path="agents/scribe/draft.md"),
            call("file_write", path="agents/scribe/draft.md", content="mine now"),
        ],
        "Read it.",
    )

    await chat.say("read the draft")

    read, write = scripted.requests[1].tool_results
    assert read == "the draft"
    assert write.startswith(
        "error: agents/scribe/draft.md may not be changed: this session may only read it"
    )
    assert (folder / "draft.md").read_text() == "the draft"


async def test_a_sibling_granted_write_is_written_and_no_other(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await talk_to(bot, channel, scripted, "builder", siblings={"scribe": "write"})
    scripted.add(
        [
            call("file_write", path="agents/scribe/draft.md", content="d"),
            call("file_write", path="agents/tester/draft.md", content="d"),
        ],
        "Done.",
    )

    await chat.say("write the draft")

    _, other = scripted.requests[1].tool_results
    assert (bot.workspace.root / "agents" / "scribe" / "draft.md").read_text() == "d"
    assert other.startswith("error: agents/tester/draft.md is outside this session's reach")


async def test_a_sibling_granted_write_is_read_only_without_a_writing_tool(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await talk_to(bot, channel, scripted, "builder", tools=READS, siblings={"scribe": "write"})
    reach = await bot.runtime.reach(await bot.router.session_for(channel.message("x")))

    assert reach == Reach(
        (Root("agents/builder", write=False), Root("agents/scribe", write=False)),
        home="agents/builder",
    )


async def test_every_sibling_reaches_every_agents_folder(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await talk_to(bot, channel, scripted, "builder", siblings={"*": "read"})
    reach = await bot.runtime.reach(await bot.router.session_for(channel.message("x")))

    assert reach.allows("agents/scribe/a.md", write=False)
    assert reach.allows("agents/builder/a.md", write=True)
    assert not reach.allows("agents/scribe/a.md", write=True)
    assert not reach.allows("notes.md", write=False)


async def test_status_names_the_folders_an_agents_files_may_be_in(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await talk_to(bot, channel, scripted, "builder", siblings={"scribe": "read"})

    handled = await chat.say("/status")

    assert handled.reply is not None
    assert "\nFiles: agents/builder (read and write), agents/scribe (read only)\n" in (
        handled.reply
    )


def test_a_sibling_that_is_no_agent_id_is_refused() -> None:
    with pytest.raises(ValueError, match=r"'\.\./etc' is not an agent id"):
        AgentSpec(agent_id="builder", name="builder", siblings={"../etc": "read"})


def test_siblings_round_trip_through_an_agent_file(tmp_path: Path) -> None:
    spec = AgentSpec(agent_id="builder", name="Builder", siblings={"scribe": "write", "*": "read"})
    path = tmp_path / "builder.toml"
    path.write_text(agent_toml(spec))

    assert '[siblings]\nscribe = "write"\n"*" = "read"\n' in path.read_text()
    assert read_agent_file(path).spec == spec


async def test_an_agent_cannot_grant_a_sibling_folder_it_does_not_reach(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    maker = ToolPolicy(allow=("agent_create", "file_read"))
    await talk_to(bot, channel, scripted, "builder", tools=maker, siblings={"scribe": "read"})
    draft = {
        "name": "Copier",
        "description": "Copies.",
        "system_prompt": "Copy.",
        "siblings": {"scribe": "write", "tester": "read"},
    }
    scripted.add(call("agent_create", draft=draft), "Could not.")

    await chat.say("make an agent that writes the scribe's folder")

    assert "siblings: you cannot grant scribe (write), tester (read)" in result_of(scripted)
    assert "copier" not in {spec.agent_id for spec in bot.agents.all()}


# children ---------------------------------------------------------------------------------


async def child_of(bot: Clawbot, parent: Session, agent_id: str) -> Session:
    child = parent.with_changes(
        key=f"{parent.key}/sub_{agent_id}", channel="internal", agent_id=agent_id,
        owner_key=parent.key,
    )  # fmt: skip
    await bot.store.sessions.create(child)
    return child


async def test_a_child_of_main_reaches_its_own_folder(bot: Clawbot, channel: MemoryChannel) -> None:
    await add_agent(bot, "builder", tools=FILES)
    root = await bot.router.session_for(channel.message("x"))

    reach = await bot.runtime.reach(await child_of(bot, root, "builder"))

    assert reach == Reach((Root("agents/builder", write=True),), home="agents/builder")


async def test_a_child_reaches_nothing_its_parents_folder_lacks(
    bot: Clawbot, channel: MemoryChannel
) -> None:
    await add_agent(bot, "builder", tools=FILES, subagents=SubagentPolicy(allow=("scribe",)))
    await add_agent(bot, "scribe", tools=FILES)
    root = await bot.router.session_for(channel.message("x"))
    builder = await child_of(bot, root, "builder")

    reach = await bot.runtime.reach(await child_of(bot, builder, "scribe"))

    assert reach == Reach()


async def test_a_child_reaches_its_folder_when_its_parent_holds_it_as_a_sibling(
    bot: Clawbot, channel: MemoryChannel
) -> None:
    await add_agent(bot, "builder", tools=FILES, siblings={"scribe": "read"})
    await add_agent(bot, "scribe", tools=FILES)
    root = await bot.router.session_for(channel.message("x"))
    builder = await child_of(bot, root, "builder")

    reach = await bot.runtime.reach(await child_of(bot, builder, "scribe"))

    assert reach == Reach((Root("agents/scribe", write=False),), home="agents/scribe")


async def test_a_coordinators_worker_reaches_its_scratchpad_and_its_own_folder(
    bot: Clawbot, channel: MemoryChannel
) -> None:
    root = await bot.router.session_for(channel.message("x"))
    await bot.router.update_session(root, agent_id="coordinator")
    coordinator = await bot.store.sessions.get(root.key)
    assert coordinator is not None

    reach = await bot.runtime.reach(await child_of(bot, coordinator, "researcher"))

    assert reach == Reach(
        (Root("agents/researcher", write=True), Root(folder_of(root.key), write=True)),
        home="agents/researcher",
    )


@pytest.mark.parametrize("how", ["delegate", "sessions_spawn"])
async def test_a_read_only_agent_delegating_to_a_writable_one_gains_nothing(
    bot: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    how: str,
) -> None:
    scribe = ScriptedModel(name="scribe")
    with scribe.installed():
        await add_agent(bot, "scribe", model=scribe.model_string, tools=FILES)
        lead_tools = ToolPolicy(allow=("file_read", "list_dir", "delegate", "sessions_spawn"))
        await talk_to(
            bot, channel, scripted, "lead", tools=lead_tools, siblings={"scribe": "write"}
        )
        await bot.agents.update(
            bot.agents.get("lead").model_copy(update={"subagents": SubagentPolicy(allow=("*",))})
        )
        arguments = {"role": "scribe"} if how == "delegate" else {"agent": "scribe"}
        scripted.add(call(how, task="write it", **arguments), "Asked.", "Ok.")
        scribe.add(call("file_write", path="agents/scribe/out.md", content="x"), "Tried.")

        await chat.say("get it written")
        await bot.scheduler.wait_idle()

    (refusal,) = scribe.requests[1].tool_results
    assert refusal.startswith("error: tool 'file_write' is not available to this agent")
    assert "file_write" not in scribe.requests[0].tool_names
    assert not (bot.workspace.root / "agents" / "scribe" / "out.md").exists()


# the shell --------------------------------------------------------------------------------


async def test_the_shell_refuses_the_workspace_root_as_an_agents_working_folder(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await talk_to(bot, channel, scripted, "builder", tools=SHELL)
    scripted.add(call("shell_exec", command="ls", cwd="."), "Refused.")

    await chat.say("list")

    assert result_of(scripted).startswith("error: . is outside this session's reach")


@needs_bwrap
async def test_the_shell_runs_in_the_agents_own_folder_by_default(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await talk_to(bot, channel, scripted, "builder", tools=SHELL)
    scripted.add(call("shell_exec", command="pwd; echo x > made.txt"), "Done.")

    await chat.say("where am I?")

    assert result_of(scripted) == "exit code 0\n/workspace/agents/builder\n"
    assert (bot.workspace.root / "agents" / "builder" / "made.txt").read_text() == "x\n"


@needs_bwrap
@pytest.mark.parametrize(
    "command", ["cat ../scribe/draft.md", "cat /workspace/agents/scribe/draft.md"]
)
async def test_the_shell_refuses_a_siblings_folder_without_a_grant(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel, command: str
) -> None:
    folder = bot.workspace.root / "agents" / "scribe"
    folder.mkdir(parents=True)
    (folder / "draft.md").write_text("the draft")
    await talk_to(bot, channel, scripted, "builder", tools=SHELL)
    scripted.add(call("shell_exec", command=command), "Refused.")

    await chat.say("read the draft")

    result = result_of(scripted)
    assert result.startswith("error: ") and "outside this session's reach" in result
    assert "the draft" not in result


@needs_bwrap
async def test_the_shell_reads_a_siblings_folder_with_a_grant(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    folder = bot.workspace.root / "agents" / "scribe"
    folder.mkdir(parents=True)
    (folder / "draft.md").write_text("the draft")
    await talk_to(bot, channel, scripted, "builder", tools=SHELL, siblings={"scribe": "read"})
    scripted.add(call("shell_exec", command="cat ../scribe/draft.md"), "Read.")

    await chat.say("read the draft")

    assert result_of(scripted) == "exit code 0\nthe draft"


@needs_bwrap
async def test_the_sandbox_mounts_only_the_agents_folders(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    (bot.workspace.root / "notes.md").write_text("the operator's")
    for agent_id in ("scribe", "tester"):
        (bot.workspace.root / "agents" / agent_id).mkdir(parents=True, exist_ok=True)
    await talk_to(bot, channel, scripted, "builder", tools=SHELL, siblings={"scribe": "read"})
    scripted.add(
        call("shell_exec", command=f"find {hidden('/workspace')} | sort; echo x > ../scribe/new"),
        "Ok.",
    )

    await chat.say("what is there?")

    listed = result_of(scripted).splitlines()
    assert listed[1:5] == [
        "/workspace",
        "/workspace/agents",
        "/workspace/agents/builder",
        "/workspace/agents/scribe",
    ]
    assert "Read-only file system" in listed[5]
    assert not (bot.workspace.root / "agents" / "scribe" / "new").exists()


@needs_bwrap
async def test_an_agents_folder_that_links_to_the_root_brings_nothing_into_the_sandbox(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    (bot.workspace.root / "notes.md").write_text("the operator's")
    (bot.workspace.root / "agents" / "builder").mkdir(parents=True, exist_ok=True)
    (bot.workspace.root / "agents" / "scribe").symlink_to("..")  # -> the workspace's root
    await talk_to(bot, channel, scripted, "scribe", tools=SHELL, siblings={"builder": "read"})
    target = hidden("/workspace/agents/scribe/notes.md")
    scripted.add(call("shell_exec", command=f"echo x > {target}", cwd="agents/builder"), "Ok.")

    await chat.say("write")

    assert not result_of(scripted).startswith("exit code 0")
    assert (bot.workspace.root / "notes.md").read_text() == "the operator's"
