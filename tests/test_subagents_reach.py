"""A child holds no more than its parent (its skills and its workspace reach, checked at
spawn and on every call), ``sessions_stop`` stops a child's whole family, and
``sessions_list`` names the peer sessions ``sessions_send`` reaches."""

from __future__ import annotations

import asyncio

from clawbot.agents import ToolPolicy
from clawbot.app import Clawbot
from clawbot.settings import PeerGroup, Settings
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel, Step, call

from .conftest import add_agent

SPAWNER = ToolPolicy(allow=("*", "sessions_spawn"))


def chat_key(channel: MemoryChannel) -> str:
    return f"{channel.name}:chat1"


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
        if request.last_user_text == "stop it":
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
