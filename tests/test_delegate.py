"""Delegation: ``delegate(role, task, tools?)`` runs a temporary child to completion and its
answer is the tool result (no announce); recursion from a delegate is impossible; a list of
tasks runs in parallel under ``max_concurrent``; a delegate's tools stay within its
parent's; agents flagged ``as_tool`` are callable as ``agent_<id>(task)``; a failing or
timed-out delegate is a clear tool error."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from clawbot.agents.files import agent_toml, read_agent_file
from clawbot.agents.profiles import AgentSpec, SubagentPolicy
from clawbot.app import Clawbot
from clawbot.errors import SubagentError
from clawbot.messages import INTERNAL_CHANNEL, ToolCallBlock
from clawbot.policies import ToolPolicy
from clawbot.routing.sessions import Session
from clawbot.settings import Settings
from clawbot.subagents.injection import TurnOrigin
from clawbot.subagents.records import ANNOUNCE_META, ChildInfo
from clawbot.testing import (
    MemoryChannel,
    ModelRequest,
    ScriptedFailure,
    ScriptedModel,
    Step,
    call,
)
from clawbot.tools.registry import ToolContext

from .conftest import Chat, add_agent, parent_key

DELEGATING = {"delegate", "sessions_spawn", "sessions_send"}


async def delegates_of(bot: Clawbot, key: str) -> list[Session]:
    return [s for s in await bot.store.sessions.children(key) if ChildInfo.is_delegate(s)]


async def announces_in(bot: Clawbot, key: str) -> int:
    stored = await bot.store.transcripts.load(key, 0)
    return sum(1 for entry in stored if ANNOUNCE_META in entry.meta)


async def use_agent(bot: Clawbot, channel: MemoryChannel, agent_id: str) -> None:
    session = await bot.router.session_for(channel.message("x"))
    await bot.router.update_session(session, agent_id=agent_id)


async def test_sessions_list_shows_the_delegates_subagents_lists_and_refuses_to_continue_one(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    def reply(request: ModelRequest) -> Step:
        if "You are a statistician." in request.system:
            return "X is 7."
        if request.messages[-1]["role"] == "tool":
            return "Got: " + request.tool_results[-1]
        if request.last_user_text == "find X":
            return call("delegate", role="statistician", task="find X")
        if request.last_user_text == "what ran":
            return call("sessions_list")
        return call("sessions_send", session=request.last_user_text, message="and Y?")

    scripted.function = reply
    await chat.say("find X")
    (delegate,) = await delegates_of(bot, parent_key(channel))
    delegate_id = delegate.key.rsplit("/", 1)[1]

    listed_to_the_person = (await chat.say("/subagents")).reply or ""
    await chat.say("what ran")
    listed_to_the_model = scripted.requests[-1].tool_results[-1]
    await chat.say(delegate_id)
    continued = scripted.requests[-1].tool_results[-1]

    assert f"• {delegate_id} · main · statistician: find X · done" in listed_to_the_person
    assert listed_to_the_model == (
        f"- {delegate_id}: agent main, idle, 'statistician: find X', a delegate (its answer"
        " was its tool call's result)"
    )
    assert continued.startswith(f"error: {delegate_id!r} is a delegate: its answer was the result")


async def test_an_ad_hoc_role_answers_as_the_tool_result_and_announces_nothing(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    def reply(request: ModelRequest) -> Step:
        if "You are a statistician." in request.system:
            return "X is 7."
        if request.tool_results:
            return "Found: " + request.tool_results[-1]
        return call("delegate", role="statistician", task="find X")

    scripted.function = reply
    await chat.say("what is X?")
    await bot.scheduler.wait_idle()

    assert channel.texts == ["Found: X is 7."]
    # parent, the delegate (same model: an ad-hoc role runs on its parent's), parent again;
    # no fourth request: no announce turn.
    assert len(scripted.requests) == 3
    child_request = scripted.requests[1]
    assert child_request.last_user_text == "find X"
    assert "You are a statistician." in child_request.system
    assert await announces_in(bot, parent_key(channel)) == 0
    (child,) = await delegates_of(bot, parent_key(channel))
    assert child.channel == INTERNAL_CHANNEL and child.deliver is False
    assert child.owner_key == parent_key(channel)
    assert child.model_override == scripted.model_string
    jobs = await bot.store.jobs.for_session(child.key)
    assert [j.status for j in jobs] == ["done"]
    assert await bot.store.injections.child_run(jobs[0].id) is None  # owes no announce
    assert await bot.store.injections.unannounced() == []
    # sessions_list shows it, marked; the other sessions_* tools do not reach a delegate: it
    # belongs to the call that ran it.
    parent = await bot.store.sessions.get(parent_key(channel))
    assert parent is not None
    assert [v.delegate for v in await bot.subagents.children(parent)] == [True]
    with pytest.raises(SubagentError, match="is a delegate: its answer was the result"):
        await bot.subagents.child(parent, child.key)


async def test_a_role_naming_an_agent_runs_that_agent(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    bot = workers
    scripted.add(call("delegate", role="worker", task="sum 2 and 2"), "It is four.")
    worker.add("4")

    await chat.say("go")
    await bot.scheduler.wait_idle()

    assert scripted.requests[1].tool_results == ["4"]
    assert worker.requests[0].last_user_text == "sum 2 and 2"
    assert "You are a worker." not in worker.requests[0].system  # its own prompt
    assert len(scripted.requests) == 2
    assert await announces_in(bot, parent_key(channel)) == 0


async def test_a_delegate_is_offered_no_delegating_tool_and_its_call_is_refused(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    await add_agent(
        bot, "expert", model=worker.model_string, as_tool=True, description="Knows things."
    )

    def reply(request: ModelRequest) -> Step:
        if "You are a helper." in request.system:
            if request.tool_results:
                return "helper done: " + request.tool_results[-1]
            return [
                call("delegate", role="helper", task="again"),
                call("sessions_spawn", task="spawned"),
                call("agent_expert", task="ask"),
            ]
        if request.tool_results:
            return "ok: " + request.tool_results[-1]
        return call("delegate", role="helper", task="work")

    scripted.function = reply
    await chat.say("go")
    await bot.scheduler.wait_idle()

    parent_tools = set(scripted.requests[0].tool_names)
    assert {"delegate", "sessions_spawn", "sessions_send", "agent_expert"} <= parent_tools
    child_request = next(r for r in scripted.requests if "You are a helper." in r.system)
    offered = set(child_request.tool_names)
    assert offered and not offered & (DELEGATING | {"agent_expert", "sessions_list"})
    assert "file_read" in offered
    refusals = next(
        r for r in scripted.requests if "You are a helper." in r.system and r.tool_results
    ).tool_results
    assert len(refusals) == 3
    assert all(r.startswith("error: tool '") and "not available" in r for r in refusals)
    # One delegate only: nothing it tried started another session or model call.
    (child,) = await delegates_of(bot, parent_key(channel))
    assert await bot.store.sessions.children(child.key) == []
    assert worker.requests == []

    # And on the call path itself, whatever tools a delegate might hold: refused.
    registry = bot.tools
    context = ToolContext(session=child, workspace=bot.workspace.root, settings=bot.settings)
    for name, arguments in (
        ("delegate", {"role": "x", "task": "y"}),
        ("agent_expert", {"task": "y"}),
        ("sessions_spawn", {"task": "y"}),
        ("sessions_send", {"session": "z", "message": "y"}),
    ):
        block = ToolCallBlock(id=f"c_{name}", name=name, arguments=arguments)
        result = await registry.execute(block, context)
        assert result.is_error and "a delegate cannot delegate or spawn" in result.content, name
    with pytest.raises(SubagentError, match="a delegate cannot delegate"):
        bot.subagents.delegation.plan(child, "anyone")


async def test_parallel_tasks_never_exceed_max_concurrent_and_keep_their_order(
    settings: Settings, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    running = 0
    peak = 0

    async def work(request: ModelRequest) -> Step:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1
        return "answer to " + request.last_user_text

    worker.function = work
    tasks = [f"t{n}" for n in range(5)]
    async with await Clawbot.open(settings.model_copy(update={"max_concurrent": 2})) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await add_agent(bot, "worker", model=worker.model_string)
        scripted.add(call("delegate", role="worker", task=tasks), "All done.")
        handled = await bot.router.handle(channel.message("go"))
        await bot.scheduler.wait_idle()
        announces = await announces_in(bot, f"{channel.name}:chat1")

    assert handled.reply == "All done."
    assert len(worker.requests) == 5
    assert peak == 2
    result = scripted.requests[1].tool_results[0]
    expected = "\n\n".join(f"## Task {n + 1}: ok\nanswer to t{n}" for n in range(5))
    assert result == expected
    assert announces == 0


async def test_the_tools_argument_cannot_exceed_the_parents_tools(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    bot = workers
    await add_agent(
        bot,
        "lead",
        model=scripted.model_string,
        tools=ToolPolicy(allow=("delegate", "file_read", "list_dir")),
    )
    await use_agent(bot, channel, "lead")

    def reply(request: ModelRequest) -> Step:
        if "You are a reader." in request.system:
            return "read it"
        if len(request.tool_results) == 0:
            return [
                call("delegate", role="reader", task="a", tools=["file_read", "file_write"]),
                call("delegate", role="reader", task="b", tools=["delegate"]),
                call("delegate", role="reader", task="c", tools=["no_such_tool"]),
                call("delegate", role="reader", task="d", tools=["file_read"]),
            ]
        return "done"

    scripted.function = reply
    await chat.say("go")
    await bot.scheduler.wait_idle()

    parent_results = next(r for r in scripted.requests if len(r.tool_results) == 4).tool_results
    too_much, nested, unknown, fine = parent_results
    assert too_much.startswith("error: the reader delegate cannot be given file_write")
    assert "it may have: file_read, list_dir" in too_much
    assert nested.startswith("error: the reader delegate cannot be given delegate")
    assert unknown.startswith("error: there is no tool no_such_tool")
    assert fine == "read it"
    # Only the fourth ran, with exactly the tool it was given.
    (child,) = await delegates_of(bot, parent_key(channel))
    info = ChildInfo.of(child)
    assert info is not None and info.tools == ("file_read",)
    child_request = next(r for r in scripted.requests if "You are a reader." in r.system)
    assert child_request.tool_names == ["file_read"]
    # Without the argument: the parent's tools, less delegate.
    plan = bot.subagents.delegation.plan(
        await bot.router.session_for(channel.message("x")), "reader"
    )
    assert plan.tools == ("file_read", "list_dir")


async def test_an_agent_flagged_as_tool_is_callable_and_answers(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    bot = workers
    await add_agent(
        bot,
        "researcher",
        model=worker.model_string,
        as_tool=True,
        description="Finds papers on a topic.",
    )
    scripted.add(call("agent_researcher", task="papers on sqlite"), "Here they are.")
    worker.add("Three papers.")

    await chat.say("go")
    await bot.scheduler.wait_idle()

    request = scripted.requests[0]
    assert "agent_researcher" in request.tool_names
    assert "agent_worker" not in request.tool_names  # not flagged
    spec = next(t for t in request.tools if t["function"]["name"] == "agent_researcher")
    assert spec["function"]["description"].startswith("Finds papers on a topic.")
    assert scripted.requests[1].tool_results == ["Three papers."]
    assert worker.requests[0].last_user_text == "papers on sqlite"
    assert channel.texts == ["Here they are."]
    assert await announces_in(bot, parent_key(channel)) == 0
    (child,) = await delegates_of(bot, parent_key(channel))
    assert child.agent_id == "researcher"

    # Unflagged: no longer offered.
    current = bot.agents.get("researcher")
    await bot.agents.update(current.model_copy(update={"as_tool": False}))
    scripted.add("plain")
    await chat.say("again")
    assert "agent_researcher" not in scripted.requests[-1].tool_names


async def test_subagents_allow_applies_to_agents_as_tools(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    bot = workers
    await add_agent(bot, "researcher", model=worker.model_string, as_tool=True)
    await add_agent(
        bot,
        "lead",
        model=scripted.model_string,
        tools=ToolPolicy(allow=("agent_researcher", "delegate", "file_read")),
        subagents=SubagentPolicy(allow=("worker",)),
    )
    await use_agent(bot, channel, "lead")
    scripted.add(
        [
            call("agent_researcher", task="x"),
            call("delegate", role="researcher", task="y"),
            call("delegate", role="worker", task="z"),
        ],
        "Done.",
    )
    worker.add("z done")

    await chat.say("go")
    await bot.scheduler.wait_idle()

    as_tool, preset, allowed = scripted.requests[1].tool_results
    assert as_tool.startswith("error: agent lead may not delegate to agent researcher")
    assert "it may run: worker" in as_tool
    assert preset.startswith("error: agent lead may not delegate to agent researcher")
    assert allowed == "z done"


async def test_a_failed_delegate_is_a_clear_tool_error(
    workers: Clawbot, chat: Chat, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    scripted.add(call("delegate", role="worker", task="try"), "It failed.")
    worker.add(*[ScriptedFailure("bad_request")] * 3)

    await chat.say("go")
    await workers.scheduler.wait_idle()

    (result,) = scripted.requests[1].tool_results
    assert result.startswith("error: the worker delegate failed: ")


async def test_a_delegate_past_its_timeout_is_a_clear_tool_error(
    settings: Settings, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    async def stuck(request: ModelRequest) -> Step:
        await asyncio.sleep(30)
        return "too late"

    worker.function = stuck
    async with await Clawbot.open(settings.model_copy(update={"subagent_timeout": 0.2})) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await add_agent(bot, "worker", model=worker.model_string)
        scripted.add(call("delegate", role="worker", task="slow"), "Gave up.")
        handled = await bot.router.handle(channel.message("go"))
        await bot.scheduler.wait_idle()
        announces = await announces_in(bot, f"{channel.name}:chat1")

    assert handled.reply == "Gave up."
    (result,) = scripted.requests[1].tool_results
    assert result == "error: the worker delegate timed out after 0.2 s and was stopped"
    assert announces == 0


async def test_a_delegate_counts_against_the_spawn_depth(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    # A spawned child (depth 1) may not delegate at the default max_spawn_depth of 1.
    parent = await bot.router.session_for(channel.message("x"))
    spawned = await bot.subagents.spawn(parent, "nested work", TurnOrigin.of(parent, None, ()))
    await bot.scheduler.wait_idle()
    child = await bot.store.sessions.get(spawned.key)
    assert child is not None
    plan = bot.subagents.delegation.plan(child, "helper")
    with pytest.raises(SubagentError, match="a delegate here would be at depth 2"):
        await bot.subagents.delegation.run(child, TurnOrigin.of(child, None, ()), plan, "t")


def test_as_tool_round_trips_through_an_agent_file(tmp_path: Path) -> None:
    spec = AgentSpec(agent_id="researcher", name="researcher", description="d", as_tool=True)
    path = tmp_path / "researcher.toml"
    path.write_text(agent_toml(spec))

    assert "as_tool = true" in path.read_text()
    assert read_agent_file(path).spec == spec


async def test_stopping_the_parent_stops_its_delegate(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    bot = workers
    started = asyncio.Event()

    async def stuck(request: ModelRequest) -> Step:
        started.set()
        await asyncio.sleep(30)
        return "too late"

    worker.function = stuck
    scripted.add(call("delegate", role="worker", task="slow"), "never")
    turn = asyncio.create_task(chat.say("go"))
    await asyncio.wait_for(started.wait(), 5)
    await chat.say("/stop")
    await asyncio.wait_for(turn, 5)
    await bot.scheduler.wait_idle()

    (child,) = await delegates_of(bot, parent_key(channel))
    assert [j.status for j in await bot.store.jobs.for_session(child.key)] == ["cancelled"]
    assert bot.scheduler.queue_state(child.key).active is None
    assert await announces_in(bot, parent_key(channel)) == 0


async def test_a_delegate_left_by_a_shutdown_is_closed_not_resumed(
    settings: Settings, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    started = asyncio.Event()

    async def stuck(request: ModelRequest) -> Step:
        started.set()
        await asyncio.sleep(30)
        return "too late"

    worker.function = stuck
    quick = settings.model_copy(update={"shutdown_timeout": 0.1})
    async with await Clawbot.open(quick) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await add_agent(bot, "worker", model=worker.model_string)
        scripted.add(call("delegate", role="worker", task="slow"))
        turn = asyncio.create_task(bot.router.handle(channel.message("go")))
        await asyncio.wait_for(started.wait(), 5)
        (child,) = await delegates_of(bot, f"{channel.name}:chat1")
    await asyncio.gather(turn, return_exceptions=True)

    # The next start: the parent's turn resumes and delegates again; the old delegate's
    # turn is closed, never run for an answer nobody waits for.
    worker.function = None
    worker.add("quick answer")
    scripted.add(call("delegate", role="worker", task="slow"), "Done again.")
    async with await Clawbot.open(quick) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await bot.start()
        await bot.scheduler.wait_idle()
        old = [j.status for j in await bot.store.jobs.for_session(child.key)]
        delegates = await delegates_of(bot, f"{channel.name}:chat1")
        announces = await announces_in(bot, f"{channel.name}:chat1")

    assert old == ["cancelled"]
    assert len(delegates) == 2
    assert [r.last_user_text for r in worker.requests] == ["slow", "slow"]
    assert channel.texts == ["Done again."]
    assert announces == 0
