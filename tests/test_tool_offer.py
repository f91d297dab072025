"""A session's tool names, asked at every file call up its chain, are exactly what a turn
of it is offered: the memoized shortcut (ToolOffer) never drifts from the resolved turn."""

from __future__ import annotations

from clawbot.agents import SubagentPolicy, ToolPolicy
from clawbot.app import Clawbot
from clawbot.resolved_turn import within_ceiling
from clawbot.sessions import Session
from clawbot.testing import MemoryChannel, ScriptedModel, call

from .conftest import Chat, add_agent, parent_key


def offered(bot: Clawbot, session: Session) -> frozenset[str]:
    """What a turn of ``session`` is offered, the long way."""
    return within_ceiling(session, bot.runtime.resolve(session)).tool_names


async def test_a_sessions_tools_are_what_its_turn_is_offered_for_people_and_children(
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
        tools=ToolPolicy(allow=("sessions_spawn", "file_read", "list_dir")),
        subagents=SubagentPolicy(allow=("worker",), message=True),
    )
    scripted.add(call("sessions_spawn", task="look", agent="worker"), "Spawned.", "ok")
    worker.add("looked")
    await bot.router.update_session(
        await bot.router.session_for(channel.message("x")), agent_id="lead"
    )
    await chat.say("spawn")
    await bot.scheduler.wait_idle()

    parent = await bot.store.sessions.get(parent_key(channel))
    assert parent is not None
    (child,) = await bot.store.sessions.children(parent.key)
    for session in (parent, child):
        assert bot.runtime.effective_tools(session) == offered(bot, session)
    assert bot.runtime.effective_tools(child) <= {"file_read", "list_dir", "sessions_spawn"}
    assert "message" not in bot.runtime.effective_tools(parent)  # a person's conversation


async def test_changing_an_agent_changes_its_sessions_tools_at_once(
    bot: Clawbot, channel: MemoryChannel
) -> None:
    session = await bot.router.session_for(channel.message("x"))
    await add_agent(bot, "reader", tools=ToolPolicy(allow=("file_read",)))
    session = await bot.router.update_session(session, agent_id="reader")
    assert bot.runtime.effective_tools(session) == {"file_read"}

    spec = bot.agents.get("reader")
    await bot.agents.update(spec.model_copy(update={"tools": ToolPolicy(allow=("list_dir",))}))

    assert bot.runtime.effective_tools(session) == {"list_dir"} == offered(bot, session)
