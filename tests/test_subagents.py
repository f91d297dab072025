"""Subagents as child sessions: spawning one, its report (the announce) reaching the parent
exactly once and shown to the parent's model for one turn only, the limits enforced where a
child is created, the loop rules of every injection, and the gate that keeps internal
traffic off every platform."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime

import pytest

from clawbot.agents.profiles import AgentSpec, SubagentPolicy
from clawbot.app import Clawbot
from clawbot.errors import MalformedMetaError, SubagentError
from clawbot.messages import INTERNAL_CHANNEL, Provenance, TranscriptEntry
from clawbot.policies import ToolPolicy
from clawbot.routing.sessions import Session
from clawbot.scheduling.jobs import TurnJob
from clawbot.settings import Settings
from clawbot.subagents.context import announce_context
from clawbot.subagents.injection import TurnOrigin
from clawbot.subagents.records import (
    ANNOUNCE_META,
    TASK_LINE_CHARS,
    AnnouncePayload,
    AnnounceResult,
    AnnounceTask,
    ChildInfo,
    Injection,
    InjectionWrite,
    Trace,
    TraceStep,
    parse_meta,
    summarize,
)
from clawbot.subagents.tree import family, render_tree
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel, ScriptedUsage, Step, call

from .conftest import Chat, add_agent, parent_key, until_idle

BLOCK = "[Context: subagent_announce]"


async def children_of(bot: Clawbot, key: str) -> list[Session]:
    return await bot.store.sessions.children(key)


async def test_a_child_reports_once_and_the_report_is_shown_for_the_next_turn_only(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    bot = workers
    scripted.add(
        call("sessions_spawn", task="find the answer", agent="worker", label="research"),
        "I asked a worker.",
        "The worker says 42.",
        "Anything else?",
    )

    async def answer(request: ModelRequest) -> Step:
        await until_idle(bot, parent_key(channel))  # the report starts a turn of its own
        return "The answer is 42."

    worker.function = answer

    await chat.say("please research")
    await bot.scheduler.wait_idle()

    assert channel.texts == ["I asked a worker.", "The worker says 42."]
    assert "Spawned 'research' as sub_" in scripted.requests[1].tool_results[0]
    assert worker.requests[0].last_user_text == "find the answer"
    announce_request = scripted.requests[2]
    assert BLOCK in announce_request.system
    assert "Result: The answer is 42." in announce_request.system
    assert "Task: find the answer\nLabel: research\n" in announce_request.system
    assert "Status: ok" in announce_request.system
    # Stored: the short line and the payload in meta, never the rendered block.
    stored = await bot.store.transcripts.load(parent_key(channel), 0)
    announces = [e for e in stored if ANNOUNCE_META in e.meta]
    assert [e.text for e in announces] == ["[@agent:worker#worker] finish"]
    assert all(BLOCK not in e.text for e in stored)
    payload = AnnouncePayload.model_validate(announces[0].meta[ANNOUNCE_META])
    assert payload.result.status == "ok"
    assert payload.task.prompt == "find the answer"
    assert payload.source_agent_id == "worker"
    # The next turn sees no block: it was for the announce's turn only.
    await chat.say("thanks")
    assert BLOCK not in scripted.requests[3].system


async def test_the_child_session_is_internal_undelivered_and_owned_by_its_parent(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    bot = workers
    scripted.add(call("sessions_spawn", task="write it", agent="worker"), "Started.", "Done.")
    worker.add("Written.")

    await chat.say("go")
    await bot.scheduler.wait_idle()

    (child,) = await children_of(bot, parent_key(channel))
    assert child.channel == INTERNAL_CHANNEL
    assert child.deliver is False
    assert child.owner_key == parent_key(channel)
    assert child.key.startswith(f"internal:{parent_key(channel)}/sub_")
    assert child.agent_id == "worker"
    info = ChildInfo.of(child)
    assert info is not None and info.depth == 1 and info.task == "write it"
    child_entries = await bot.store.transcripts.load(child.key, 0)
    assert [e.text for e in child_entries] == ["write it", "Written."]
    assert child_entries[0].provenance.source == "internal"


async def test_internal_session_traffic_never_reaches_an_adapter(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    bot = workers
    other = MemoryChannel("other")
    bot.connect(other)
    scripted.add(
        call("sessions_spawn", task="one", agent="worker"),
        call("sessions_spawn", task="two", agent="worker"),
        "Started two.",
    )
    worker.add("child one answer", "child two answer")

    await chat.say("go")
    await bot.scheduler.wait_idle()

    sent = channel.sent + other.sent
    assert all(m.session_key == parent_key(channel) for m in sent)
    assert not any("child" in m.text and "answer" in m.text for m in sent)
    assert other.sent == []
    assert len(await children_of(bot, parent_key(channel))) == 2


async def test_a_second_level_spawn_is_refused_at_the_default_depth(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    # main spawns a copy of itself; the copy tries to spawn again.
    requests: list[str] = []

    def reply(request: ModelRequest) -> Step:
        requests.append(request.last_user_text)
        if request.messages[-1]["role"] == "tool":
            return "done: " + request.tool_results[-1]
        if request.last_user_text == "go":
            return call("sessions_spawn", task="nested")
        if request.last_user_text == "nested":
            return call("sessions_spawn", task="deeper")
        return "ok"

    scripted.function = reply
    await chat.say("go")
    await bot.scheduler.wait_idle()

    (child,) = await children_of(bot, parent_key(channel))
    child_entries = await bot.store.transcripts.load(child.key, 0)
    refusal = next(e for e in child_entries if e.role == "tool").content[0]
    assert "spawn depth limit reached: a child here would be at depth 2" in str(refusal)
    assert "max_spawn_depth is 1" in str(refusal)
    assert await children_of(bot, child.key) == []


async def test_the_children_limit_refuses_a_spawn_while_that_many_run(
    settings: Settings, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    release = asyncio.Event()

    async def slow(request: ModelRequest) -> Step:
        await release.wait()
        return "finished"

    worker.function = slow
    limited = settings.model_copy(update={"max_children": 2})
    async with await Clawbot.open(limited) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await add_agent(bot, "worker", model=worker.model_string)
        scripted.add(
            [call("sessions_spawn", task=f"task {n}", agent="worker") for n in range(3)],
            "Spawned what I could.",
        )
        handled = await bot.router.handle(channel.message("go"))
        results = scripted.requests[1].tool_results
        release.set()
        await bot.scheduler.wait_idle()

    assert handled.reply == "Spawned what I could."
    assert "Spawned" in results[0] and "Spawned" in results[1]
    assert results[2].startswith("error: children limit reached: 2 children of this session")
    assert "max_children is 2" in results[2]


async def test_an_unknown_agent_is_refused_listing_the_valid_ones(
    workers: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(call("sessions_spawn", task="x", agent="nobody"), "Sorry.")

    await chat.say("go")

    result = scripted.requests[1].tool_results[0]
    assert result.startswith("error: there is no agent 'nobody'")
    assert "the agents are: main, " in result and ", worker" in result


async def test_an_agent_may_spawn_only_what_its_profile_allows(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    bot = workers
    await add_agent(bot, "helper", model=worker.model_string)
    await add_agent(
        bot,
        "lead",
        model=scripted.model_string,
        tools=ToolPolicy(allow=("sessions_spawn", "file_read")),
        subagents=SubagentPolicy(allow=("worker",)),
    )
    await bot.router.update_session(
        await bot.router.session_for(channel.message("x")), agent_id="lead"
    )
    scripted.add(
        [
            call("sessions_spawn", task="a", agent="helper"),
            call("sessions_spawn", task="b", agent="worker"),
        ],
        "Spawned one.",
    )
    worker.add("b done")

    await chat.say("go")
    await bot.scheduler.wait_idle()

    refused, spawned = scripted.requests[1].tool_results
    assert refused.startswith("error: agent lead may not spawn agent helper")
    assert "it may spawn: worker" in refused
    assert spawned.startswith("Spawned")
    # Without an explicit list, a non-main agent may spawn only itself.
    assert AgentSpec(agent_id="x", name="x").may_spawn("x")
    assert not AgentSpec(agent_id="x", name="x").may_spawn("main")
    assert AgentSpec(agent_id="main", name="main").may_spawn("anyone")


async def test_a_child_never_holds_a_tool_its_parent_lacks(
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
        subagents=SubagentPolicy(allow=("worker",)),
    )
    await bot.router.update_session(
        await bot.router.session_for(channel.message("x")), agent_id="lead"
    )
    scripted.add(call("sessions_spawn", task="write a file", agent="worker"), "Started.", "Ok.")
    worker.add(call("file_write", path="out.md", content="x"), "I could not write it.")

    await chat.say("go")
    await bot.scheduler.wait_idle()

    spawned = scripted.requests[1].tool_results[0]
    refused = (
        "agents_list, file_edit, file_write, memory_forget, memory_get, memory_search,"
        " memory_store, models_list, schedule_cancel, schedule_create, schedule_list, send_file,"
        " skill_read"
    )
    assert f"Refused to it, because you lack them: {refused}." in spawned
    assert set(worker.requests[0].tool_names) == {"file_read", "list_dir"}
    assert worker.requests[1].tool_results == [
        "error: tool 'file_write' is not available to this agent"
    ]
    assert not (bot.workspace.root / "out.md").exists()


async def spawn_a_child_that_times_out(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    """The person asks; the lead spawns a worker whose model never answers, with a 0.05 s
    timeout; the lead answers the report; everything is idle at the end."""
    never = asyncio.Event()

    async def hang(request: ModelRequest) -> Step:
        await never.wait()
        return "too late"

    worker.function = hang
    scripted.add(
        call("sessions_spawn", task="slow work", agent="worker", timeout=0.05),
        "Started.",
        "It timed out.",
    )
    await chat.say("go")
    await bot.scheduler.wait_idle()


async def test_a_child_timeout_stops_its_run_and_reports_timeout(
    workers: Clawbot, chat: Chat, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    bot = workers
    await spawn_a_child_that_times_out(bot, chat, scripted, worker)

    announce_request = scripted.requests[2]
    assert "Status: timeout" in announce_request.system
    assert "turn deadline of" in announce_request.system


async def test_a_timed_out_child_shows_timeout_in_subagents_and_the_tree_as_its_report_does(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    bot = workers
    await spawn_a_child_that_times_out(bot, chat, scripted, worker)

    listed = (await chat.say("/subagents")).reply or ""
    parent = await bot.store.sessions.get(parent_key(channel))
    assert parent is not None
    tree = render_tree(await family(bot.store, parent), datetime.now(UTC))

    assert "Status: timeout" in scripted.requests[2].system
    assert re.fullmatch(r"• sub_\w+ · worker · slow work · timeout · .*", listed.splitlines()[1])
    assert re.search(r"└ sub_\w+  worker · timeout · ", tree)


async def test_sessions_send_continues_a_child_and_each_turn_reports_once(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    bot = workers
    scripted.add(call("sessions_spawn", task="count to one", agent="worker"), "Started.")
    answers = iter(["one", "two"])

    async def answer(request: ModelRequest) -> Step:
        await until_idle(bot, parent_key(channel))  # each report starts a turn of its own
        return next(answers)

    worker.function = answer

    await chat.say("go")
    await bot.scheduler.wait_idle()
    (child,) = await children_of(bot, parent_key(channel))
    child_id = child.key.rsplit("/", 1)[1]
    scripted.add(call("sessions_send", session=child_id, message="now two"), "Sent.", "Got two.")
    # the parent's announce turn answered "ok" (script ran out); now continue the child
    await chat.say("continue it")
    await bot.scheduler.wait_idle()

    stored = await bot.store.transcripts.load(parent_key(channel), 0)
    reports = [
        AnnouncePayload.model_validate(e.meta[ANNOUNCE_META]).result.summary
        for e in stored
        if ANNOUNCE_META in e.meta
    ]
    assert reports == ["one", "two"]


async def test_a_session_that_is_not_your_child_is_refused(
    workers: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(
        [
            call("sessions_send", session="memory:chat2", message="hi"),
            call("sessions_history", session="sub_nope"),
            call("sessions_stop", session="sub_nope"),
        ],
        "No.",
    )

    await chat.say("go")

    for result in scripted.requests[1].tool_results:
        assert "is not a child of this session" in result
        assert "your children are: none" in result


async def test_ping_pong_between_parent_and_child_stops_at_max_hops(
    settings: Settings, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    # The parent answers every report by sending the child more work; the child always
    # answers. Without the hop limit this never ends.
    def parent(request: ModelRequest) -> Step:
        if request.messages[-1]["role"] == "tool":
            return "stopping: " + request.tool_results[-1]
        if request.last_user_text == "start":
            return call("sessions_spawn", task="ping", agent="worker")
        spawned = re.search(r"as (sub_\w+)", " ".join(request.tool_results))
        assert spawned is not None
        return call("sessions_send", session=spawned[1], message="ping again")

    scripted.function = parent
    worker.default_text = "pong"
    limited = settings.model_copy(update={"max_hops": 5})
    async with await Clawbot.open(limited) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await add_agent(bot, "worker", model=worker.model_string)
        await bot.router.handle(channel.message("start"))
        await bot.scheduler.wait_idle()

    # spawn (hop 1), then sends at hops 2..5 each answered; the send at hop 6 is dropped
    assert len(worker.requests) == 5
    assert channel.texts[-1].startswith("stopping: error: dropped: this chain of agents")
    assert "max_hops) is 5" in channel.texts[-1]


async def test_a_cycle_a_b_c_a_is_refused_and_so_is_a_self_send(bot: Clawbot) -> None:
    for key in ("a", "b", "c"):
        await bot.store.sessions.create(
            Session(key=f"internal:{key}", channel=INTERNAL_CHANNEL, chat_id=key, agent_id="main")
        )

    def hop(source: str, target: str, path: tuple[str, ...], n: int) -> Injection:
        return Injection(
            kind="message",
            target_key=f"internal:{target}",
            source_key=f"internal:{source}",
            text="hello",
            provenance=Provenance(channel=INTERNAL_CHANNEL, source="internal"),
            idempotency_key=f"{source}>{target}",
            hop=n,
            trace=Trace(
                trace_id="t1",
                path=tuple(TraceStep(session_key=f"internal:{p}", agent_id=p) for p in path),
            ),
        )

    injector = bot.subagents.injector
    injector.check(hop("a", "b", ("a", "b"), 1))
    injector.check(hop("b", "c", ("a", "b", "c"), 2))
    with pytest.raises(SubagentError, match=r"loop \(a>b>c>a\)"):
        await injector.inject(hop("c", "a", ("a", "b", "c", "a"), 3))
    with pytest.raises(SubagentError, match="cannot send a message to itself"):
        await injector.inject(hop("a", "a", ("a", "a"), 1))
    assert await bot.store.transcripts.count("internal:a") == 0


async def test_a_repeated_injection_is_stored_once(bot: Clawbot) -> None:
    await bot.store.sessions.create(
        Session(key="internal:x", channel=INTERNAL_CHANNEL, chat_id="x", agent_id="main")
    )
    injection = Injection(
        kind="message",
        target_key="internal:x",
        source_key="memory:chat1",
        text="do it",
        provenance=Provenance(channel=INTERNAL_CHANNEL, source="internal"),
        idempotency_key="k1",
        hop=1,
        trace=Trace(trace_id="t", path=(TraceStep(session_key="internal:x", agent_id="main"),)),
    )

    first = await bot.subagents.injector.inject(injection)
    again = await bot.subagents.injector.inject(injection)
    await bot.scheduler.wait_idle()

    assert first is not None and again is None
    entries = await bot.store.transcripts.load("internal:x", 0)
    assert [e.text for e in entries if e.role == "user"] == ["do it"]


def payload_of(task: AnnounceTask) -> AnnouncePayload:
    return AnnouncePayload(
        trace_id="t",
        hop=1,
        idempotency_key="announce:p:c:j",
        source_agent_id="worker",
        source_agent_name="Worker",
        source_session_key="internal:p/c",
        source_run_id="j",
        task=task,
        result=AnnounceResult(status="ok", summary="found"),
    )


def test_the_report_block_shows_the_task_clipped_and_a_label_of_its_own_apart() -> None:
    long_task = "Find every paper on attention since 2017 and list them. " * 20
    unlabelled = payload_of(AnnounceTask(label=long_task[:60].strip(), prompt=summarize(long_task)))
    labelled = payload_of(AnnounceTask(label="papers", prompt="find the papers"))

    (task_line,) = [line for line in unlabelled.render().splitlines() if line.startswith("Task:")]
    assert task_line.startswith("Task: Find every paper on attention since 2017 and list them.")
    assert len(task_line) == len("Task: ") + TASK_LINE_CHARS and task_line.endswith("…")
    assert "Label:" not in unlabelled.render()  # the label is the task's start: said once
    assert "\nTask: find the papers\nLabel: papers\nStatus: ok\n" in labelled.render()


def test_payloads_round_trip_and_a_malformed_one_is_a_clear_error() -> None:
    payload = AnnouncePayload(
        trace_id="t",
        hop=1,
        idempotency_key="announce:p:c:j",
        source_agent_id="worker",
        source_agent_name="Worker",
        source_session_key="internal:p/c",
        source_run_id="j",
        task=AnnounceTask(label="research", prompt="find it"),
        result=AnnounceResult(status="ok", summary="found"),
    )
    injection = Injection(
        kind="announce",
        target_key="p",
        source_key="internal:p/c",
        text=payload.text,
        provenance=Provenance(channel=INTERNAL_CHANNEL, source="internal"),
        idempotency_key=payload.idempotency_key,
        hop=1,
        trace=Trace(trace_id="t"),
        meta_json=f'{{"{ANNOUNCE_META}": {payload.model_dump_json()}}}',
    )

    assert Injection.model_validate_json(injection.model_dump_json()) == injection
    assert parse_meta(AnnouncePayload, injection.meta()[ANNOUNCE_META], "p") == payload
    with pytest.raises(MalformedMetaError, match=r"announce payload is malformed \(result"):
        parse_meta(AnnouncePayload, {**payload.model_dump(), "result": "??"}, "announce payload")
    with pytest.raises(ValueError, match="not a JSON object"):
        injection.model_copy(update={}).model_validate(
            {**injection.model_dump(), "meta_json": "[]"}
        )
    # An old row with an unreadable payload renders as a note, not a crash.
    old = TranscriptEntry(role="user", content=(), meta={ANNOUNCE_META: {"kind": "old"}})
    (block,) = announce_context([old])
    assert block.startswith(BLOCK) and "cannot be read" in block


def test_a_persons_turn_starts_a_trace_and_an_injected_one_continues_it() -> None:
    session = Session(key="m:1", channel="m", chat_id="1", agent_id="main")
    root = TurnOrigin.of(session, "turn_1", [])
    assert root.hop == 0 and root.trace.agents == "main"
    hop, trace = root.onward("internal:m:1/c", "worker")
    assert hop == 1 and trace.agents == "main>worker" and trace.trace_id == "turn_1"


class Notifying:
    """The bot's announcer, and an event set once it has reported a child's turn."""

    def __init__(self, bot: Clawbot) -> None:
        self.announcer = bot.subagents.announcer
        self.reported = asyncio.Event()

    async def turn_ended(self, session: Session, job_id: str) -> None:
        await self.announcer.turn_ended(session, job_id)
        self.reported.set()

    async def recover(self) -> None:
        await self.announcer.recover()


async def test_a_report_for_a_busy_parent_waits_in_its_backlog_and_is_still_rendered(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    bot = workers
    hook = Notifying(bot)
    bot.scheduler.bind_turn_ends(hook)

    async def parent(request: ModelRequest) -> Step:
        if request.messages[-1]["role"] == "tool":
            await hook.reported.wait()  # the report arrives while this turn still runs
            return "Started."
        if request.last_user_text == "go":
            return call("sessions_spawn", task="find it", agent="worker")
        return "The worker found it."

    scripted.function = parent
    worker.add("Found it.")

    await chat.say("go")
    await bot.scheduler.wait_idle()

    assert channel.texts == ["Started.", "The worker found it."]
    last = scripted.requests[-1]
    assert BLOCK in last.system and "Result: Found it." in last.system
    assert last.last_user_text.startswith("[Backlog]")


async def test_stopping_a_child_ends_its_run_and_reports_cancelled(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    bot = workers
    never = asyncio.Event()

    async def hang(request: ModelRequest) -> Step:
        await never.wait()
        return "too late"

    worker.function = hang
    scripted.add(call("sessions_spawn", task="slow", agent="worker"), "Started.")
    await chat.say("go")
    scripted.add(call("sessions_stop", session="all"), "Stopped it.", "It reported.")

    await chat.say("stop it")
    await bot.scheduler.wait_idle()

    assert scripted.requests[3].tool_results[-1].endswith(": stopped")
    assert "Status: cancelled" in scripted.requests[-1].system
    assert channel.texts == ["Started.", "Stopped it.", "It reported."]


async def test_a_persons_stop_ends_the_childs_run_without_a_report_waking_the_parent(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    bot = workers
    never = asyncio.Event()
    entered = asyncio.Event()

    async def hang(request: ModelRequest) -> Step:
        entered.set()
        await never.wait()
        return "too late"

    worker.function = hang
    scripted.add(call("sessions_spawn", task="slow", agent="worker"), "Started.")
    await chat.say("go")
    [child] = await children_of(bot, parent_key(channel))
    await bot.scheduler.submit(
        child,
        TranscriptEntry.model_validate(
            {"role": "user", "content": [{"type": "text", "text": "more"}]}
        ),
        lane="subagent",
    )
    await entered.wait()

    result = await chat.say("/stop")
    await asyncio.wait_for(bot.scheduler.wait_idle(), 30)  # a child left waiting would hang
    await bot.close()
    async with await Clawbot.open(bot.settings) as restarted:
        restarted.connect(MemoryChannel())
        await restarted.start()
        await restarted.scheduler.wait_idle()
        jobs = await restarted.store.jobs.for_session(child.key)

    assert result.reply == "Nothing was running here; stopped 1 subagent turn(s)."
    assert len(scripted.requests) == 2  # the spawn and its answer: no turn for a report
    assert channel.texts == ["Started.", result.reply]
    assert [(job.status, job.error) for job in jobs] == [
        ("cancelled", "stopped with its parent"),
        ("cancelled", "stopped with its parent"),
    ]


async def test_the_store_writes_one_report_per_child_turn_whatever_the_key(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    bot = workers
    scripted.add(call("sessions_spawn", task="find it", agent="worker"), "Started.")
    worker.add("Found it.")
    await chat.say("go")
    await bot.scheduler.wait_idle()
    (child,) = await children_of(bot, parent_key(channel))
    (run,) = [job for job in await bot.store.jobs.for_session(child.key) if job.status == "done"]
    reported = await bot.store.injections.child_run(run.id)
    assert reported is not None and reported.announced

    again = await bot.store.injections.submit(
        await bot.router.session_for(channel.message("x")),
        TurnJob(id="turn_again", session_key=parent_key(channel), lane="announce"),
        injection=InjectionWrite(
            key="another-key", kind="announce", source_key=child.key, hop=1, announces=(run.id,)
        ),
        entry=TranscriptEntry(role="user", content=()),
    )

    assert again is False
    assert await bot.store.jobs.get("turn_again") is None
    assert await bot.store.injections.unannounced() == []


async def test_one_report_of_several_child_turns_is_written_only_when_none_was_reported(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    bot = workers
    scripted.add(call("sessions_spawn", task="find it", agent="worker"), "Started.")
    worker.add("Found it.")
    await chat.say("go")
    await bot.scheduler.wait_idle()
    (child,) = await children_of(bot, parent_key(channel))
    (run,) = [job for job in await bot.store.jobs.for_session(child.key) if job.status == "done"]
    parent = await bot.router.session_for(channel.message("x"))
    owed = await bot.store.injections.submit(  # a further turn of the child, not run here
        child,
        TurnJob(id="turn_owed", session_key=child.key, lane="subagent"),
        injection=InjectionWrite(
            key="more", kind="message", source_key=parent.key, hop=1, parent_key=parent.key
        ),
        entry=TranscriptEntry(role="user", content=()),
    )

    async def report(key: str, *jobs: str) -> bool:
        return await bot.store.injections.submit(
            parent,
            TurnJob(id=f"turn_{key}", session_key=parent.key, lane="announce"),
            injection=InjectionWrite(
                key=key, kind="announce", source_key=child.key, hop=1, announces=jobs
            ),
            entry=TranscriptEntry(role="user", content=()),
        )

    with_a_reported_one = await report("both", run.id, "turn_owed")
    still_owed = await bot.store.injections.child_run("turn_owed")
    alone = await report("alone", "turn_owed")
    now_reported = await bot.store.injections.child_run("turn_owed")

    assert owed is True
    assert with_a_reported_one is False and await bot.store.jobs.get("turn_both") is None
    assert still_owed is not None and not still_owed.announced
    assert alone is True and now_reported is not None and now_reported.announced


async def test_the_report_names_the_files_the_child_wrote(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    bot = workers
    scripted.add(call("sessions_spawn", task="write notes", agent="worker"), "Started.", "Done.")
    worker.add(
        [
            call("file_write", path="agents/worker/notes.md", content="n"),
            call("file_read", path="agents/worker/missing.md"),
        ],
        call("file_edit", path="agents/worker/missing.md", old="a", new="b"),
        "",
    )

    await chat.say("go")
    await bot.scheduler.wait_idle()

    stored = await bot.store.transcripts.load(parent_key(channel), 0)
    (entry,) = [e for e in stored if ANNOUNCE_META in e.meta]
    payload = AnnouncePayload.model_validate(entry.meta[ANNOUNCE_META])
    # the failed edit is not
    assert [a.path for a in payload.result.artifacts] == ["agents/worker/notes.md"]
    assert payload.result.summary  # no final text: the last useful tool result stands in
    assert payload.stats.duration_ms is not None and payload.stats.duration_ms >= 0
    assert "Artifacts: agents/worker/notes.md" in scripted.requests[2].system


async def reported_stats(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel, worker: ScriptedModel
) -> tuple[AnnouncePayload, str]:
    """Spawn a worker that answers in one tool round (two model calls); its report's
    payload, and the Stats line the parent's model saw."""
    scripted.add(call("sessions_spawn", task="look", agent="worker"), "Started.", "Done.")
    worker.add(call("file_read", path="missing.md"), "Looked.")
    await chat.say("go")
    await bot.scheduler.wait_idle()
    stored = await bot.store.transcripts.load(parent_key(channel), 0)
    (entry,) = [e for e in stored if ANNOUNCE_META in e.meta]
    (stats,) = re.findall(r"^Stats: .*$", scripted.requests[2].system, re.MULTILINE)
    return AnnouncePayload.model_validate(entry.meta[ANNOUNCE_META]), stats


async def test_the_report_sums_the_childs_tokens_and_cost_and_the_parent_sees_them(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    worker.usage = ScriptedUsage(prompt_tokens=100, completion_tokens=20, cost_usd=0.00075)

    payload, stats = await reported_stats(workers, chat, channel, scripted, worker)

    assert payload.stats.tokens == 240
    assert payload.stats.cost_usd == pytest.approx(0.0015)
    assert re.fullmatch(r"Stats: \d+ ms, 240 tokens, \$0\.0015", stats)


async def test_a_child_on_a_model_without_a_price_reports_its_tokens_and_no_cost(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    worker.usage = ScriptedUsage(prompt_tokens=100, completion_tokens=20)

    payload, stats = await reported_stats(workers, chat, channel, scripted, worker)

    assert payload.stats.tokens == 240
    assert payload.stats.cost_usd is None
    assert re.fullmatch(r"Stats: \d+ ms, 240 tokens", stats)
