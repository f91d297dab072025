"""Nobody is asked to approve a call that cannot run: a path outside the session's reach,
invalid arguments, a shell folder it may not use, a spawn of an unknown agent or past
max_spawn_depth, a message that would close a loop is refused at once, unasked, and the
model is told why."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clawbot.app import Clawbot
from clawbot.policies import RiskProfile, ToolPolicy
from clawbot.settings import PeerGroup
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel, Step, call

from .conftest import add_agent, parent_key
from .test_approvals import ask, command, is_request, supervised, writes


@pytest.fixture
async def bot(tmp_path: Path, scripted: ScriptedModel) -> AsyncIterator[Clawbot]:
    async with await Clawbot.open(supervised(tmp_path, scripted)) as opened:
        opened.connect(MemoryChannel())
        await add_agent(
            opened,
            "coder",
            model=scripted.model_string,
            tools=ToolPolicy(allow=("file_read", "file_write", "file_edit", "shell_exec")),
        )
        yield opened


@pytest.fixture
async def coder_chat(bot: Clawbot) -> MemoryChannel:
    channel = bot.outbox.adapter("memory")
    assert isinstance(channel, MemoryChannel)
    session = await bot.router.session_for(channel.message("x"))
    await bot.router.update_session(session, agent_id="coder")
    return channel


async def test_a_write_outside_the_agents_folder_is_refused_without_asking(
    bot: Clawbot, coder_chat: MemoryChannel, scripted: ScriptedModel, tmp_path: Path
) -> None:
    scripted.add(writes("plan.md"), "I may not write there.")

    await bot.router.handle(coder_chat.message("make a plan"))
    await bot.scheduler.wait_idle()

    assert not any(is_request(m) for m in coder_chat.sent)
    assert coder_chat.texts == ["I may not write there."]
    result = scripted.requests[1].tool_results[0]
    assert result.startswith("error: not run: plan.md is outside this session's reach")
    assert not (tmp_path / "home" / "workspace" / "plan.md").exists()
    (record,) = [r for r in await bot.store.audit.tail(10) if r.tool == "file_write"]
    assert record.status == "refused" and not record.approval_required


async def test_a_write_inside_the_agents_folder_is_still_asked(
    bot: Clawbot, coder_chat: MemoryChannel, scripted: ScriptedModel
) -> None:
    scripted.add(writes("agents/coder/plan.md"), "Written.")

    await bot.router.receive(coder_chat.message("make a plan"))
    request = await coder_chat.sent_when(is_request)

    assert "file_write" in request.text and "agents/coder/plan.md" in request.text


async def test_invalid_arguments_are_refused_without_asking(
    bot: Clawbot, coder_chat: MemoryChannel, scripted: ScriptedModel
) -> None:
    scripted.add(call("file_write", path="agents/coder/plan.md"), "I forgot the content.")

    await bot.router.handle(coder_chat.message("make a plan"))
    await bot.scheduler.wait_idle()

    assert not any(is_request(m) for m in coder_chat.sent)
    assert "content: Field required" in scripted.requests[1].tool_results[0]


async def test_a_shell_command_in_a_folder_out_of_reach_is_refused_without_asking(
    bot: Clawbot, coder_chat: MemoryChannel, scripted: ScriptedModel
) -> None:
    scripted.add(call("shell_exec", command="ls", cwd="."), "Not there.")

    await bot.router.handle(coder_chat.message("list the workspace"))
    await bot.scheduler.wait_idle()

    assert not any(is_request(m) for m in coder_chat.sent)
    assert scripted.requests[1].tool_results[0].startswith("error: not run: ")


async def test_a_spawn_of_an_unknown_agent_is_refused_without_asking(
    bot: Clawbot, scripted: ScriptedModel
) -> None:
    channel = bot.outbox.adapter("memory")
    assert isinstance(channel, MemoryChannel)
    scripted.add(call("sessions_spawn", task="look it up", agent="ghost"), "No such agent.")

    await bot.router.handle(channel.message("research this"))
    await bot.scheduler.wait_idle()

    assert not any(is_request(m) for m in channel.sent)
    assert channel.texts == ["No such agent."]
    result = scripted.requests[1].tool_results[0]
    assert result.startswith("error: not run: there is no agent 'ghost' — the agents are: ")
    assert await bot.store.sessions.children(parent_key(channel)) == []
    (record,) = [r for r in await bot.store.audit.tail(20) if r.tool == "sessions_spawn"]
    assert record.status == "refused" and not record.approval_required
    assert record.approval_result == "not asked: the call could not run"
    assert await bot.store.approvals.grants_under(parent_key(channel)) == []


async def test_a_spawn_past_max_spawn_depth_is_refused_without_asking(
    bot: Clawbot, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    channel = bot.outbox.adapter("memory")
    assert isinstance(channel, MemoryChannel)
    await add_agent(
        bot, "helper", model=worker.model_string, tools=ToolPolicy(allow=("sessions_spawn",))
    )
    scripted.add(call("sessions_spawn", task="look it up", agent="helper"), "Started.", "Ok.")
    worker.add(call("sessions_spawn", task="look deeper", agent="helper"), "I looked myself.")

    _, asked = await ask(bot, channel, "research this")  # the person's own spawn is asked
    await command(bot, channel, f"/approve {asked} once")
    await bot.scheduler.wait_idle()

    assert sum(is_request(m) for m in channel.sent) == 1
    result = worker.requests[1].tool_results[0]
    assert result.startswith("error: not run: spawn depth limit reached: a child here would")
    (child,) = await bot.store.sessions.children(parent_key(channel))
    assert await bot.store.sessions.children(child.key) == []
    refused = [r for r in await bot.store.audit.tail(20) if r.session_key == child.key]
    assert [(r.tool, r.status, r.approval_required) for r in refused] == [
        ("sessions_spawn", "refused", False)
    ]
    assert await bot.store.approvals.grants_under(parent_key(channel)) == []


async def test_a_message_that_would_close_a_loop_is_refused_without_asking(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    # alpha and beta pass it on without asking; gamma's agent asks before each message
    def reply(request: ModelRequest) -> Step:
        if request.messages[-1]["role"] == "tool":
            return "result: " + request.tool_results[-1]
        text = request.last_user_text
        if text == "start":
            return call("sessions_send", session="memory:chat2", message="pass it on")
        if "session memory:chat1]" in text:  # beta, from alpha
            return call("sessions_send", session="memory:chat3", message="pass it on")
        return call("sessions_send", session="memory:chat1", message="pass it on")  # gamma

    scripted.function = reply
    settings = supervised(
        tmp_path,
        scripted,
        peer_groups={"team": PeerGroup(agents=("alpha", "beta", "gamma"))},
        risk_profiles={"trusting": RiskProfile(autonomy="full")},
    )
    peers = ToolPolicy(allow=("sessions_send",))
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        for n, agent_id in enumerate(("alpha", "beta", "gamma"), start=1):
            trusting = "trusting" if agent_id != "gamma" else "default"
            await add_agent(
                bot, agent_id, model=scripted.model_string, tools=peers, risk_profile=trusting
            )
            session = await bot.router.session_for(channel.message("x", chat_id=f"chat{n}"))
            await bot.router.update_session(session, agent_id=agent_id)

        await bot.router.handle(channel.message("start", chat_id="chat1"))
        await bot.scheduler.wait_idle()

        assert not any(is_request(m) for m in channel.sent)
        assert [m.text for m in channel.sent if m.chat_id == "chat3"] == [
            "result: error: not run: refused: this message would go round in a loop"
            " (alpha>beta>gamma>alpha) — answer with what you have instead"
        ]
        gamma = [r for r in await bot.store.audit.tail(20) if r.session_key == "memory:chat3"]
        assert [(r.tool, r.status, r.approval_required) for r in gamma] == [
            ("sessions_send", "refused", False)
        ]
        assert await bot.store.approvals.grants_under("memory:chat3") == []
