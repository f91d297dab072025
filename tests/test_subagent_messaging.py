"""A subagent writing to the person (the ``message`` tool, only where its profile allows it,
through the outbox's one path for it), and peer groups (two agents' sessions messaging each
other only when both are in one group)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from clawbot.agents.files import agent_toml
from clawbot.agents.profiles import AgentSpec, SubagentPolicy
from clawbot.app import Clawbot
from clawbot.channels.interface import ChannelLimits, SentMessage
from clawbot.channels.outbox import Outbox
from clawbot.channels.rendering import render_parts
from clawbot.errors import SubagentError
from clawbot.messages import INTERNAL_CHANNEL, OutboundMessage
from clawbot.policies import ToolPolicy
from clawbot.routing.sessions import Session
from clawbot.settings import PeerGroup, Settings, load_settings
from clawbot.subagents.messaging import REFUSAL, SubagentMessenger
from clawbot.subagents.peers import PeerGroups
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel, Step, call

from .conftest import Chat, add_agent

MAY_MESSAGE = SubagentPolicy(message=True)


def root_key(channel: MemoryChannel) -> str:
    return f"{channel.name}:chat1"


def messenger_of(bot: Clawbot) -> SubagentMessenger:
    return SubagentMessenger(
        settings=bot.settings,
        store=bot.store,
        agents=bot.agents,
        outbox=bot.outbox,
        scheduler=bot.scheduler,
    )


async def only_child(bot: Clawbot, key: str) -> Session:
    (child,) = await bot.store.sessions.children(key)
    return child


# the message tool -------------------------------------------------------------------------


async def test_a_permitted_subagent_message_reaches_the_root_chat_under_its_role(
    bot: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    await add_agent(bot, "researcher", model=worker.model_string, subagents=MAY_MESSAGE)
    scripted.add(call("sessions_spawn", task="look it up", agent="researcher"), "Started.", "Ok.")
    worker.add(call("message", text="Halfway there: 3 papers so far."), "Found 5 papers.")

    await chat.say("research this")
    await bot.scheduler.wait_idle()

    assert "message" in worker.requests[0].tool_names
    assert worker.requests[1].tool_results == ["Posted to the person's chat (1 message)."]
    posted = [m for m in channel.sent if m.text.startswith("[researcher]: ")]
    assert [m.text for m in posted] == ["[researcher]: Halfway there: 3 papers so far."]
    assert posted[0].chat_id == "chat1" and posted[0].session_key == root_key(channel)
    # the parent's own tools never include it: its replies reach the person already
    assert "message" not in scripted.requests[0].tool_names
    # the parent's agent sees what the person was told, from its next turn on
    told = "[@agent:researcher#researcher] to the person: Halfway there: 3 papers so far."
    stored = await bot.store.transcripts.load(root_key(channel), 0)
    assert [e.text for e in stored if e.text.startswith("[@agent:researcher#researcher] to")] == [
        told
    ]
    announce_turn = scripted.requests[-1].messages
    assert any(m["role"] == "user" and m["content"] == told for m in announce_turn)


async def test_a_subagent_writes_to_the_person_at_most_three_times_a_turn(
    bot: Clawbot, channel: MemoryChannel, chat: Chat, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    await add_agent(bot, "researcher", model=worker.model_string, subagents=MAY_MESSAGE)
    scripted.add(call("sessions_spawn", task="look it up", agent="researcher"), "Started.", "Ok.")
    worker.add([call("message", text=f"update {n}") for n in range(1, 5)], "Done.")

    await chat.say("research this")
    await bot.scheduler.wait_idle()

    results = worker.requests[1].tool_results
    assert results[:3] == ["Posted to the person's chat (1 message)."] * 3
    assert results[3].startswith("error: you wrote to the person 3 times this turn, the limit is 3")
    assert [m.text for m in channel.sent if m.text.startswith("[researcher]")] == [
        "[researcher]: update 1",
        "[researcher]: update 2",
        "[researcher]: update 3",
    ]


async def test_a_long_message_is_chunked_like_any_reply(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    class Chunking(MemoryChannel):
        """Splits a message into 100-character parts, as a platform adapter does."""

        async def send(self, message: OutboundMessage) -> list[SentMessage]:
            sent: list[SentMessage] = []
            for start in range(0, len(message.text), 100):
                part = message.model_copy(update={"text": message.text[start : start + 100]})
                sent.extend(await super().send(part))
            return sent

    chunking = Chunking()
    bot.connect(chunking)
    await add_agent(bot, "researcher", model=worker.model_string, subagents=MAY_MESSAGE)
    scripted.add(call("sessions_spawn", task="write", agent="researcher"), "Started.", "Ok.")
    worker.add(call("message", text="x" * 250), "Done.")

    await bot.router.handle(chunking.message("go"))
    await bot.scheduler.wait_idle()

    assert worker.requests[1].tool_results == ["Posted to the person's chat (3 messages)."]
    # the parent's "Started." may go out before or after the child's message
    parts = [text for text in chunking.texts if text not in ("Started.", "Ok.")]
    assert "".join(parts) == "[researcher]: " + "x" * 250


class Rendering(MemoryChannel):
    """Sends each part the shared renderer makes for Telegram, as the Telegram adapter does,
    and keeps the texts the platform received."""

    def __init__(self) -> None:
        super().__init__()
        self.received: list[str] = []

    async def send(self, message: OutboundMessage) -> list[SentMessage]:
        self.sent.append(message)
        parts = render_parts(message.text, ChannelLimits(4096, "telegram_html"))
        self.received.extend(part.text for part in parts)
        return [SentMessage(channel=self.name, chat_id=message.chat_id) for _ in parts]


async def test_a_one_word_message_reaches_the_person_as_written(
    bot: Clawbot, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    # "[writer]: Done." is a Markdown link reference definition, which renders to nothing
    rendering = Rendering()
    bot.connect(rendering)
    await add_agent(bot, "writer", model=worker.model_string, subagents=MAY_MESSAGE)
    scripted.add(call("sessions_spawn", task="write", agent="writer"), "Started.", "Ok.")
    worker.add(call("message", text="Done."), "Finished.")

    await bot.router.handle(rendering.message("go"))
    await bot.scheduler.wait_idle()

    assert worker.requests[1].tool_results == ["Posted to the person's chat (1 message)."]
    assert "[writer]: Done." in rendering.received


async def test_a_message_the_platform_posts_nothing_of_is_refused_and_not_counted(
    bot: Clawbot, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    class Swallowing(MemoryChannel):
        """Takes the first message and posts nothing of it."""

        async def send(self, message: OutboundMessage) -> list[SentMessage]:
            sent = await super().send(message)
            return [] if len(self.sent) == 1 else sent

    swallowing = Swallowing()
    bot.connect(swallowing)
    await add_agent(bot, "writer", model=worker.model_string, subagents=MAY_MESSAGE)
    scripted.add(call("sessions_spawn", task="write", agent="writer"), "Started.", "Ok.")
    worker.add([call("message", text=f"update {n}") for n in range(1, 5)], "Finished.")

    await bot.router.handle(swallowing.message("go"))
    await bot.scheduler.wait_idle()

    results = worker.requests[1].tool_results
    assert results[0].startswith("error: the message was not posted: the platform took none")
    assert results[1:] == ["Posted to the person's chat (1 message)."] * 3
    stored = await bot.store.transcripts.load(root_key(swallowing), 0)
    assert [e.text for e in stored if " to the person: " in e.text] == [
        f"[@agent:writer#writer] to the person: update {n}" for n in (2, 3, 4)
    ]


async def test_a_subagent_without_the_permission_reaches_no_adapter(
    bot: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    other = MemoryChannel("other")
    bot.connect(other)
    await add_agent(bot, "researcher", model=worker.model_string)  # message off (default)
    scripted.add(call("sessions_spawn", task="look it up", agent="researcher"), "Started.", "Ok.")
    worker.add(call("message", text="hello person"), "Found nothing.")

    await chat.say("research this")
    await bot.scheduler.wait_idle()

    # not offered, and refused when called anyway
    assert "message" not in worker.requests[0].tool_names
    assert worker.requests[1].tool_results == [
        "error: tool 'message' is not available to this agent: " + REFUSAL
    ]
    # every send is the parent's own reply; the subagent's text reached no adapter
    assert channel.texts == ["Started.", "Ok."]
    assert other.sent == []
    # even called directly, the messenger refuses it, naming the permission, and sends nothing
    child = await only_child(bot, root_key(channel))
    with pytest.raises(SubagentError, match=r"may not message the person: subagents\.message"):
        await messenger_of(bot).post(child, "hello person")
    assert channel.texts == ["Started.", "Ok."] and other.sent == []


async def test_a_grandchild_message_goes_to_the_root_chat_not_its_parent(
    settings: Settings, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    def work(request: ModelRequest) -> Step:
        if request.messages[-1]["role"] == "tool":
            return "done"
        if request.last_user_text == "top task":
            return call("sessions_spawn", task="sub task", agent="researcher")
        if request.last_user_text == "sub task":
            return call("message", text="from the grandchild")
        return "ok"

    worker.function = work
    deeper = settings.model_copy(update={"max_spawn_depth": 2})
    async with await Clawbot.open(deeper) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await add_agent(
            bot,
            "researcher",
            model=worker.model_string,
            subagents=MAY_MESSAGE,
            tools=ToolPolicy(allow=("*", "sessions_spawn")),
        )
        scripted.add(call("sessions_spawn", task="top task", agent="researcher"), "Started.")
        scripted.default_text = "Noted."
        await bot.router.handle(channel.message("go"))
        await bot.scheduler.wait_idle()

        child = await only_child(bot, root_key(channel))
        grandchild = await only_child(bot, child.key)
        assert grandchild.channel == INTERNAL_CHANNEL
        posted = [m for m in channel.sent if m.text.startswith("[researcher]: ")]
        assert [(m.text, m.session_key) for m in posted] == [
            ("[researcher]: from the grandchild", root_key(channel))
        ]
        child_entries = await bot.store.transcripts.load(child.key, 0)
        assert not any("from the grandchild" in e.text for e in child_entries)


async def test_a_grandchild_holds_message_only_when_its_parent_does(
    settings: Settings, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    def work(request: ModelRequest) -> Step:
        if request.messages[-1]["role"] == "tool":
            return "done"
        if request.last_user_text == "top task":
            return call("sessions_spawn", task="sub task", agent="talker")
        return "ok"

    worker.function = work
    deeper = settings.model_copy(update={"max_spawn_depth": 2})
    async with await Clawbot.open(deeper) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await add_agent(
            bot,
            "quiet",
            model=worker.model_string,
            tools=ToolPolicy(allow=("*", "sessions_spawn")),
            subagents=SubagentPolicy(allow=("talker",)),
        )
        await add_agent(bot, "talker", model=worker.model_string, subagents=MAY_MESSAGE)
        scripted.add(call("sessions_spawn", task="top task", agent="quiet"), "Started.")
        scripted.default_text = "Noted."
        await bot.router.handle(channel.message("go"))
        await bot.scheduler.wait_idle()

        # the spawn's result: the request of quiet's turn that carries it (the talker's
        # first request may come before it or after)
        spawned = next(r for r in worker.requests if r.tool_results).tool_results[0]
        assert "Refused to it, because you lack them: message." in spawned
        talker_request = next(r for r in worker.requests if r.last_user_text == "sub task")
        assert "message" not in talker_request.tool_names


async def test_a_persons_conversation_never_gets_the_message_tool(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    await add_agent(bot, "talker", model=scripted.model_string, subagents=MAY_MESSAGE)
    session = await bot.router.session_for(chat.channel.message("x"))
    await bot.router.update_session(session, agent_id="talker")
    scripted.add(call("message", text="hi"), "Ok.")

    await chat.say("go")

    assert "message" not in scripted.requests[0].tool_names
    assert scripted.requests[1].tool_results == [
        "error: tool 'message' is not available to this agent: " + REFUSAL
    ]


# peer groups ------------------------------------------------------------------------------

PEER_TOOLS = ToolPolicy(allow=("*", "sessions_send", "sessions_spawn"))


async def peers_bot(settings: Settings, model: ScriptedModel, **groups: tuple[str, ...]) -> Clawbot:
    """A bot with agents alpha, beta and gamma; chat1 talks to alpha, chat2 to beta, chat3
    to gamma; ``groups`` are its peer groups."""
    configured = settings.model_copy(
        update={"peer_groups": {name: PeerGroup(agents=agents) for name, agents in groups.items()}}
    )
    bot = await Clawbot.open(configured)
    bot.connect(MemoryChannel())
    for n, agent_id in enumerate(("alpha", "beta", "gamma"), start=1):
        await add_agent(bot, agent_id, model=model.model_string, tools=PEER_TOOLS)
        session = await bot.router.session_for(MemoryChannel().message("x", chat_id=f"chat{n}"))
        await bot.router.update_session(session, agent_id=agent_id)
    return bot


def sent_by(bot: Clawbot) -> MemoryChannel:
    adapter = bot.outbox.adapter("memory")
    assert isinstance(adapter, MemoryChannel)
    return adapter


async def test_peers_in_a_group_message_each_other_and_others_are_refused(
    settings: Settings, scripted: ScriptedModel
) -> None:
    def reply(request: ModelRequest) -> Step:
        if request.messages[-1]["role"] == "tool":
            return "result: " + request.tool_results[-1]
        if request.last_user_text == "tell beta":
            return call("sessions_send", session="memory:chat2", message="the build is green")
        if request.last_user_text == "tell gamma":
            return call("sessions_send", session="memory:chat3", message="the build is green")
        return "heard: " + request.last_user_text

    scripted.function = reply
    bot = await peers_bot(settings, scripted, team=("alpha", "beta"), ops=("gamma",))
    async with bot:
        channel = sent_by(bot)
        await bot.router.handle(channel.message("tell beta", chat_id="chat1"))
        await bot.router.handle(channel.message("tell gamma", chat_id="chat1"))
        await bot.scheduler.wait_idle()

        beta = await bot.store.transcripts.load("memory:chat2", 0)
        gamma = await bot.store.transcripts.load("memory:chat3", 0)

    assert [e.text for e in beta if e.role == "user"] == [
        "[@peer:alpha#alpha session memory:chat1] the build is green"
    ]
    assert gamma == []
    to_alpha = [m.text for m in channel.sent if m.chat_id == "chat1"]
    assert to_alpha[0] == (
        "result: Sent to peer session memory:chat2. It answers with sessions_send, if at all."
    )
    refused = to_alpha[1]
    assert refused.startswith("result: error: 'memory:chat3' is not a child of this session")
    assert "agents alpha and gamma are not peers: no peer group holds both" in refused
    assert "(peer groups of alpha: team; of gamma: ops)" in refused
    assert "[peer_groups.<name>]" in refused
    # beta's turn answered the peer message in its own conversation
    assert [m.text for m in channel.sent if m.chat_id == "chat2"] == [
        "heard: [@peer:alpha#alpha session memory:chat1] the build is green"
    ]


async def test_a_peer_ping_pong_stops_at_max_hops(
    settings: Settings, scripted: ScriptedModel
) -> None:
    # Each peer answers every peer message by messaging the sender back: without the hop
    # limit this never ends.
    received: list[str] = []

    def reply(request: ModelRequest) -> Step:
        if request.messages[-1]["role"] == "tool":
            return "result: " + request.tool_results[-1]
        text = request.last_user_text
        if text == "start":
            return call("sessions_send", session="memory:chat2", message="ping")
        # a peer message that arrives while the session is busy comes inside a backlog
        sender = re.search(r"\[@peer:\w+#\w+ session (\S+)\]", text)
        assert sender is not None
        received.append(sender[1])
        return call("sessions_send", session=sender[1], message="ping")

    scripted.function = reply
    limited = settings.model_copy(update={"max_hops": 4})
    bot = await peers_bot(limited, scripted, team=("alpha", "beta"))
    async with bot:
        channel = sent_by(bot)
        await bot.router.handle(channel.message("start", chat_id="chat1"))
        await bot.scheduler.wait_idle()

    # hops 1..4 delivered (beta, alpha, beta, alpha); the send at hop 5 is dropped
    assert received == [
        "memory:chat1",
        "memory:chat2",
        "memory:chat1",
        "memory:chat2",
    ]
    last = channel.sent[-1].text
    assert last.startswith("result: error: dropped: this chain of agents")
    assert "max_hops) is 4" in last


async def test_a_peer_ping_pong_between_subagents_reaches_their_owner_as_one_report(
    settings: Settings, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    # The person's agent spawns beta, then alpha, which messages beta; each answers every
    # peer message by messaging the sender back until max_hops (8) drops one.
    def owner(request: ModelRequest) -> Step:
        if request.messages[-1]["role"] == "tool":
            return "Started."
        if request.last_user_text == "start beta":
            return call("sessions_spawn", task="wait for alpha", agent="beta")
        if request.last_user_text == "start alpha":
            return call("sessions_spawn", task="talk to your peer", agent="alpha")
        return "Reported."

    def peer(request: ModelRequest) -> Step:
        if request.messages[-1]["role"] == "tool":
            found = re.search(r"- (internal:\S+): agent beta", request.tool_results[-1])
            if found:  # alpha's list of peers
                return call("sessions_send", session=found[1], message="ping")
            return "Done."
        text = request.last_user_text
        if text == "talk to your peer":
            return call("sessions_list")
        if text == "wait for alpha":
            return "Waiting."
        sender = re.search(r"\[@peer:\w+#\w+ session (\S+)\]", text)
        assert sender is not None
        return call("sessions_send", session=sender[1], message="ping")

    scripted.function = owner
    worker.function = peer
    configured = settings.model_copy(
        update={"peer_groups": {"team": PeerGroup(agents=("alpha", "beta"))}}
    )
    peers = ToolPolicy(allow=("*", "sessions_send", "sessions_list"))
    async with await Clawbot.open(configured) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        for agent_id in ("alpha", "beta"):
            await add_agent(bot, agent_id, model=worker.model_string, tools=peers)
        await bot.router.handle(channel.message("start beta"))
        await bot.scheduler.wait_idle()
        before = len(channel.sent)
        await bot.router.handle(channel.message("start alpha"))
        await bot.scheduler.wait_idle()
        unreported = await bot.store.injections.unannounced()

    exchanged = [r for r in worker.requests if r.messages[-1]["role"] == "user"]
    assert len(exchanged) == 9  # beta's task, alpha's task, the peer messages at hops 2 to 8
    assert [m.text for m in channel.sent[before:]] == ["Started.", "Reported."]
    reports = scripted.requests[-1].system.count("[Context: subagent_announce]")
    assert reports == 8  # every turn of the exchange, in the owner's one turn
    assert unreported == []


async def test_a_peer_cycle_a_b_c_a_is_refused(settings: Settings, scripted: ScriptedModel) -> None:
    def reply(request: ModelRequest) -> Step:
        if request.messages[-1]["role"] == "tool":
            return "result: " + request.tool_results[-1]
        text = request.last_user_text
        if text == "start":
            return call("sessions_send", session="memory:chat2", message="pass it on")
        if "session memory:chat1]" in text:  # beta, from alpha
            return call("sessions_send", session="memory:chat3", message="pass it on")
        if "session memory:chat2]" in text:  # gamma, from beta
            return call("sessions_send", session="memory:chat1", message="pass it on")
        return "end"

    scripted.function = reply
    bot = await peers_bot(settings, scripted, team=("alpha", "beta", "gamma"))
    async with bot:
        channel = sent_by(bot)
        await bot.router.handle(channel.message("start", chat_id="chat1"))
        await bot.scheduler.wait_idle()
        alpha = await bot.store.transcripts.load("memory:chat1", 0)

    assert [e.text for e in alpha if e.role == "user"] == ["start"]
    to_gamma = [m.text for m in channel.sent if m.chat_id == "chat3"]
    assert to_gamma == [
        "result: error: refused: this message would go round in a loop (alpha>beta>gamma>alpha)"
        " — answer with what you have instead"
    ]


async def test_a_subagent_cannot_message_a_persons_conversation_even_a_peers(
    settings: Settings, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    bot = await peers_bot(settings, scripted, team=("alpha", "beta", "worker"))
    async with bot:
        channel = sent_by(bot)
        await add_agent(bot, "worker", model=worker.model_string, tools=PEER_TOOLS)
        scripted.add(call("sessions_spawn", task="report to beta", agent="worker"), "Started.")
        scripted.default_text = "Ok."
        worker.add(call("sessions_send", session="memory:chat2", message="hi beta"), "Could not.")
        main = await bot.router.session_for(channel.message("x", chat_id="chat4"))
        await bot.router.handle(channel.message("go", chat_id="chat4"))
        await bot.scheduler.wait_idle()
        beta = await bot.store.transcripts.load("memory:chat2", 0)

    assert main.agent_id == "main"
    assert (
        worker.requests[1]
        .tool_results[0]
        .startswith("error: a subagent cannot message a person's conversation (memory:chat2)")
    )
    assert beta == []
    assert [m.chat_id for m in channel.sent] == ["chat4", "chat4"]


async def test_a_peer_group_naming_an_unknown_agent_is_logged(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    configured = settings.model_copy(
        update={"peer_groups": {"team": PeerGroup(agents=("main", "ghost"))}}
    )
    async with await Clawbot.open(configured):
        pass

    assert "peer group 'team' names agent 'ghost', which does not exist" in caplog.text


def test_peer_groups_are_read_from_clawbot_toml(tmp_path: Path) -> None:
    (tmp_path / "clawbot.toml").write_text(
        '[peer_groups.research]\nagents = ["alpha", "beta"]\n\n'
        '[peer_groups.ops]\nagents = ["gamma"]\n',
        encoding="utf-8",
    )
    settings = load_settings(home=tmp_path / "home")

    assert settings.peer_groups == {
        "research": PeerGroup(agents=("alpha", "beta")),
        "ops": PeerGroup(agents=("gamma",)),
    }
    groups = PeerGroups(settings)
    assert groups.shared("alpha", "beta") == ("research",)
    assert groups.shared("alpha", "gamma") == ()
    assert groups.of("delta") == ()


async def test_deliver_on_behalf_passes_the_gate_as_the_roots_message() -> None:
    outbox = Outbox()
    channel = MemoryChannel()
    outbox.connect(channel)
    root = Session(key="memory:chat1", channel="memory", chat_id="chat1", agent_id="main")
    quiet = Session(
        key="memory:cron", channel="memory", chat_id="cron", agent_id="main", deliver=False
    )
    internal = Session(
        key="internal:memory:chat1/sub_x",
        channel=INTERNAL_CHANNEL,
        chat_id="sub_x",
        agent_id="main",
        deliver=False,
        owner_key="memory:chat1",
    )

    sent = await outbox.deliver_on_behalf(root, "hello", role="Researcher")
    withheld = await outbox.deliver_on_behalf(quiet, "hello", role="Researcher")
    refused = await outbox.deliver_on_behalf(internal, "hello", role="Researcher")

    assert (sent.status, withheld.status, refused.status) == ("sent", "withheld", "withheld")
    assert [(m.text, m.session_key) for m in channel.sent] == [
        ("[Researcher]: hello", "memory:chat1")
    ]


def test_an_agent_file_keeps_its_subagent_policy() -> None:
    spec = AgentSpec(
        agent_id="researcher",
        name="Researcher",
        subagents=SubagentPolicy(allow=("writer",), message=True),
    )

    assert AgentSpec.model_validate(tomllib.loads(agent_toml(spec))) == spec
    assert "[subagents]" not in agent_toml(AgentSpec(agent_id="plain", name="plain"))
