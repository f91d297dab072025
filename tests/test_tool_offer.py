"""A session's tool names, asked at every file call up its chain, are exactly what a turn
of it is offered: the memoized shortcut (ToolOffer) never drifts from the resolved turn."""

from __future__ import annotations

from clawbot.agents.profiles import SubagentPolicy
from clawbot.app import Clawbot
from clawbot.policies import ToolPolicy
from clawbot.routing.sessions import Session
from clawbot.runtime.resolved_turn import within_ceiling
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


async def worker_child(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> Session:
    """A ``worker`` child spawned by a ``lead`` whose own tools are spawning and listing."""
    await add_agent(
        bot,
        "lead",
        model=scripted.model_string,
        tools=ToolPolicy(allow=("sessions_spawn", "list_dir")),
        subagents=SubagentPolicy(allow=("worker",)),
    )
    scripted.add(call("sessions_spawn", task="look", agent="worker"), "Spawned.", "ok")
    lead = await bot.router.update_session(
        await bot.router.session_for(channel.message("x")), agent_id="lead"
    )
    await chat.say("spawn")
    await bot.scheduler.wait_idle()
    (child,) = await bot.store.sessions.children(lead.key)
    return child


async def test_a_person_and_a_child_of_one_agent_each_get_the_tools_of_their_own_ceiling(
    workers: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    """One resolved turn of ``worker`` serves both: the narrowing kept on it per ceiling
    never hands one session's tools to the other, in either order."""
    bot = workers
    child = await worker_child(bot, chat, channel, scripted)
    person = await bot.router.session_for(channel.message("y", chat_id="other"))
    person = await bot.router.update_session(person, agent_id="worker")
    assert bot.runtime.resolve(person) is bot.runtime.resolve(child)

    for first, second in ((child, person), (person, child)):
        bot.runtime.tools_changed()  # resolved afresh: nothing narrowed yet
        narrowed_first = offered(bot, first)
        assert offered(bot, second) != narrowed_first
        assert offered(bot, first) == narrowed_first
    assert offered(bot, child) <= {"sessions_spawn", "list_dir"}
    assert "file_write" in offered(bot, person)


async def test_a_sessions_turns_share_one_narrowed_offer_so_its_schemas_are_measured_once(
    workers: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    """The window check before each model call measures the offered schemas once per
    tuple it is given: a child's turns must offer the very same tuple each time."""
    bot = workers
    child = await worker_child(bot, chat, channel, scripted)

    first = within_ceiling(child, bot.runtime.resolve(child))
    again = within_ceiling(child, bot.runtime.resolve(child))

    assert again.tool_specs is first.tool_specs
