"""A child holds no more than its parent (its skills and its workspace reach, checked at
spawn and on every call), ``sessions_stop`` stops a child's whole family, and
``sessions_list`` names the peer sessions ``sessions_send`` reaches."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from clawbot.agents.profiles import SubagentPolicy
from clawbot.app import Clawbot
from clawbot.errors import ToolError
from clawbot.policies import ToolPolicy
from clawbot.security.reach import Reach, Root
from clawbot.settings import PeerGroup, Settings
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel, Step, call

from .conftest import Chat, add_agent

SPAWNER = ToolPolicy(allow=("*", "sessions_spawn"))


def chat_key(channel: MemoryChannel) -> str:
    return f"{channel.name}:chat1"


LEAD_TOOLS = ToolPolicy(
    allow=("sessions_spawn", "delegate", "skill_read", "file_read", "file_write", "list_dir")
)
"""The lead: file tools and skills, the spawn and delegate tools, nothing else."""


def write_skill(workspace: Path, name: str) -> None:
    folder = workspace / "skills" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: the {name} way\n---\nDo it the {name} way.\n"
    )


async def lead_bot(bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel) -> None:
    """The chat talks to ``lead``, which may use skill ``house-style`` but not
    ``secret-recipe``, and may spawn ``worker``, whose own profile allows every skill."""
    write_skill(bot.workspace.root, "house-style")
    write_skill(bot.workspace.root, "secret-recipe")
    bot.runtime.skills.changed()
    await add_agent(
        bot,
        "lead",
        model=scripted.model_string,
        tools=LEAD_TOOLS,
        skills=ToolPolicy(allow=("*",), deny=("secret-recipe",)),
        subagents=SubagentPolicy(allow=("worker",)),
        siblings={"worker": "write"},
    )
    await bot.router.update_session(
        await bot.router.session_for(channel.message("x")), agent_id="lead"
    )


# sessions_stop ----------------------------------------------------------------------------


async def test_sessions_stop_stops_the_grandchildren_of_the_child_it_stops(
    settings: Settings, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    never = asyncio.Event()
    entered = asyncio.Event()

    async def work(request: ModelRequest) -> Step:
        if request.messages[-1]["role"] == "tool":
            return "started it"
        if request.last_user_text == "top task":
            return call("sessions_spawn", task="sub task")
        entered.set()
        await never.wait()  # the grandchild works until it is stopped
        return "too late"

    def lead(request: ModelRequest) -> Step:
        if request.messages[-1]["role"] == "tool":
            return "result: " + request.tool_results[-1]
        if request.last_user_text == "go":
            return call("sessions_spawn", task="top task", agent="worker")
        if "stop it" in request.last_user_text:
            # also when it steered the turn answering the child's report (a [Backlog] turn)
            return call("sessions_stop", session="all")
        return "Noted."

    worker.function = work
    scripted.function = lead
    deeper = settings.model_copy(update={"max_spawn_depth": 2})
    async with await Clawbot.open(deeper) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await add_agent(bot, "worker", model=worker.model_string, tools=SPAWNER)
        await bot.router.handle(channel.message("go"))
        await entered.wait()
        handled = await bot.router.handle(channel.message("stop it"))
        await asyncio.wait_for(bot.scheduler.wait_idle(), 30)  # a live grandchild would hang
        (child,) = await bot.store.sessions.children(chat_key(channel))
        (grandchild,) = await bot.store.sessions.children(child.key)
        jobs = await bot.store.jobs.for_session(grandchild.key)

    assert handled.reply is not None
    assert handled.reply.endswith("; stopped 1 turn(s) of the subagents it started")
    assert [(job.status, job.error) for job in jobs] == [("cancelled", "stopped with its parent")]


# sessions_list ----------------------------------------------------------------------------


async def test_sessions_list_names_the_peer_sessions_sessions_send_reaches(
    settings: Settings, scripted: ScriptedModel
) -> None:
    groups = {"team": PeerGroup(agents=("alpha", "beta")), "ops": PeerGroup(agents=("gamma",))}
    tools = ToolPolicy(allow=("*", "sessions_list", "sessions_send"))
    async with await Clawbot.open(settings.model_copy(update={"peer_groups": groups})) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        for n, agent_id in enumerate(("alpha", "beta", "gamma"), start=1):
            await add_agent(bot, agent_id, model=scripted.model_string, tools=tools)
            session = await bot.router.session_for(channel.message("x", chat_id=f"chat{n}"))
            await bot.router.update_session(session, agent_id=agent_id)
        scripted.add(call("sessions_list"), "Listed.")

        await bot.router.handle(channel.message("who is there?", chat_id="chat1"))

    assert scripted.requests[1].tool_results == [
        "You have no subagents.\n"
        "Peers (sessions_send with the key):\n"
        "- memory:chat2: agent beta, group team"
    ]


# skills -----------------------------------------------------------------------------------


async def test_a_child_is_offered_only_the_skills_its_parent_may_use(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    await lead_bot(workers, channel, scripted)
    scripted.add(call("sessions_spawn", task="write it up", agent="worker"), "Started.", "Ok.")
    worker.add("Written.")

    await chat.say("go")
    await workers.scheduler.wait_idle()

    system = worker.requests[0].system
    assert "- house-style: the house-style way" in system
    assert "secret-recipe" not in system


async def test_a_grandchild_gets_no_skill_its_grandparent_lacks(
    settings: Settings, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    def work(request: ModelRequest) -> Step:
        if request.messages[-1]["role"] == "tool":
            return "started it"
        if request.last_user_text == "top task":
            return call("sessions_spawn", task="sub task")
        return "done"

    worker.function = work
    deeper = settings.model_copy(update={"max_spawn_depth": 2})
    async with await Clawbot.open(deeper) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await lead_bot(bot, channel, scripted)
        await add_agent(bot, "worker", model=worker.model_string, tools=SPAWNER)
        scripted.add(call("sessions_spawn", task="top task", agent="worker"), "Started.")
        scripted.default_text = "Noted."
        await bot.router.handle(channel.message("go"))
        await bot.scheduler.wait_idle()

    grandchild = next(r for r in worker.requests if r.last_user_text == "sub task")
    assert "- house-style: the house-style way" in grandchild.system
    assert "secret-recipe" not in grandchild.system


async def test_a_spawn_names_the_skills_refused_to_the_child(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    await lead_bot(workers, channel, scripted)
    scripted.add(call("sessions_spawn", task="write it up", agent="worker"), "Started.", "Ok.")
    worker.add("Written.")

    await chat.say("go")
    await workers.scheduler.wait_idle()

    spawned = scripted.requests[1].tool_results[0]
    assert spawned.endswith(
        " Skills refused to it, because you lack them or their tools: secret-recipe."
    )


async def test_a_child_reading_a_skill_its_parent_lacks_is_refused(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    await lead_bot(workers, channel, scripted)
    scripted.add(call("sessions_spawn", task="cook", agent="worker"), "Started.", "Ok.")
    worker.add(call("skill_read", name="secret-recipe"), "I may not.")

    await chat.say("go")
    await workers.scheduler.wait_idle()

    (refusal,) = worker.requests[1].tool_results
    assert refusal.startswith(
        "error: the skill 'secret-recipe' is not available to you: a subagent uses only "
        "skills the session that started it may use"
    )
    listed = refusal.split("your skills: ")[1]
    assert "house-style" in listed and "secret-recipe" not in listed


async def test_a_delegate_is_offered_only_the_skills_its_parent_may_use(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    await lead_bot(workers, channel, scripted)
    scripted.add(call("delegate", role="worker", task="write it up"), "Done.")
    worker.add("Written.")

    await chat.say("go")

    system = worker.requests[0].system
    assert "- house-style: the house-style way" in system
    assert "secret-recipe" not in system


# workspace reach --------------------------------------------------------------------------


async def test_a_parent_that_loses_file_write_stops_its_running_child_writing(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    bot = workers
    await lead_bot(bot, channel, scripted)

    async def work(request: ModelRequest) -> Step:
        if len(worker.requests) == 1:
            return call("file_write", path="agents/worker/first.md", content="1")
        if len(worker.requests) == 2:  # the lead becomes read-only while its child works
            lead = bot.agents.get("lead")
            narrower = ToolPolicy(allow=("sessions_spawn", "file_read", "list_dir"))
            await bot.agents.update(lead.model_copy(update={"tools": narrower}))
            return call("file_write", path="agents/worker/second.md", content="2")
        return "done"

    worker.function = work
    scripted.add(call("sessions_spawn", task="write two files", agent="worker"), "Started.")
    scripted.default_text = "Noted."

    await chat.say("go")
    await bot.scheduler.wait_idle()

    folder = bot.workspace.root / "agents" / "worker"
    assert (folder / "first.md").read_text() == "1"
    assert not (folder / "second.md").exists()
    refusal = worker.requests[2].tool_results[-1]
    assert refusal.startswith(
        "error: agents/worker/second.md may not be changed: this session may only read it "
        "(its reach: agents/worker (read only))"
    )


async def test_a_grandchilds_reach_is_within_every_owner_up_its_chain(
    workers: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    bot = workers
    await lead_bot(bot, channel, scripted)
    root = await bot.router.session_for(channel.message("x"))
    child = root.with_changes(key="internal:r/sub_1", agent_id="worker", owner_key=root.key)
    grandchild = child.with_changes(key="internal:r/sub_1/sub_2", owner_key=child.key)
    for session in (child, grandchild):
        await bot.store.sessions.create(session)
    before = await bot.runtime.reach(grandchild)
    read_only = ToolPolicy(allow=("file_read", "list_dir"))
    await bot.agents.update(bot.agents.get("lead").model_copy(update={"tools": read_only}))

    after = await bot.runtime.reach(grandchild)

    assert before.allows("agents/worker/a.md", write=True)
    assert not after.allows("agents/worker/a.md", write=True)
    assert after.allows("agents/worker/a.md", write=False)


def test_a_reach_within_a_narrower_root_keeps_only_that_root() -> None:
    ceiling = Reach((Root("notes", write=True), Root("docs", write=False)))

    reach = Reach.whole().within(ceiling)

    assert reach.allows("notes/a.md", write=True)
    assert reach.allows("docs/a.md", write=False)
    assert not reach.allows("docs/a.md", write=True)
    assert not reach.allows("notesx/a.md", write=False)
    with pytest.raises(ToolError, match=r"secret\.md is outside this session's reach"):
        reach.check("secret.md", "secret.md", write=False)
