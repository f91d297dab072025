"""Property-based: random trees of agents that spawn children, send them follow-ups, get
their reports and delegate tasks, with the process crashing at random model calls and
restarting. Over every generated case: nothing an internal session produces reaches a
platform; every child turn's result reaches its parent exactly once (a spawned child's as
one report, a delegate's as one tool result, never as a report); the person's message gets
its answer; every run ends, within the depth, children and hop limits.

Each case runs in its own event loop and home folder, with the intake journal on, as the
product runs. A crash abandons the Clawbot without closing it, as a killed process would:
its clawbot tasks are cancelled where they stand (none gets to release its job), its
intake journal is let go unwritten (the kernel's part in a real crash), its database
connection is dropped, and the next Clawbot opens on the same home with the clock past the
job lease so it takes the work over.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from clawbot.agents.profiles import AgentSpec, SubagentPolicy
from clawbot.app import Clawbot
from clawbot.clock import ManualClock
from clawbot.messages import INTERNAL_CHANNEL, ToolResultBlock
from clawbot.policies import ToolPolicy
from clawbot.routing.sessions import Session, child_key
from clawbot.settings import Settings
from clawbot.subagents.injection import TurnOrigin
from clawbot.subagents.records import (
    ANNOUNCE_META,
    CHILD_META,
    AnnouncePayload,
    ChildInfo,
    headers_of,
)
from clawbot.subagents.spawning import spawn_id
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedCall, ScriptedModel, Step, call

from .conftest import sqlite_store

ROOT_KEY = "memory:chat1"
WORKERS = ("w1", "w2")
ROLES = (*WORKERS, "checker")
"""Who a delegate may be: an agent, or an ad-hoc role that runs on its parent's agent."""
MAX_DEPTH = 2
MAX_CHILDREN = 2
MAX_HOPS = 4
MAX_CRASHES = 2
CASE_TIMEOUT = 30.0
"""Seconds one generation may run before the case counts as one that never ends."""
FINISHED = ("done", "failed", "cancelled")
FROM = re.compile(r"^From: .* \(session (?P<key>\S+)\)$", re.MULTILINE)
DONE = re.compile(r"\bdone (r[\d.]*\.d\d+)\b")
"""A delegate's answer in its parent's tool result."""
RESULT = re.compile(r"^Result: done (?P<path>[\d.r]+)(?: follow (?P<k>\d+))?", re.MULTILINE)


@dataclass(frozen=True)
class Node:
    """One session of the tree: the agent it runs (a delegate's: its role), how many
    follow-ups its parent sends it after its reports, and the children it spawns and the
    tasks it delegates on its first turn."""

    agent: str
    follow_ups: int = 0
    children: tuple[Node, ...] = ()
    delegates: tuple[Node, ...] = ()


def delegates() -> st.SearchStrategy[tuple[Node, ...]]:
    return st.lists(st.builds(Node, agent=st.sampled_from(ROLES)), max_size=2).map(tuple)


def trees() -> st.SearchStrategy[Node]:
    leaf = st.builds(
        Node,
        agent=st.sampled_from(WORKERS),
        follow_ups=st.integers(0, 2),
        delegates=delegates(),
    )
    nested = st.recursive(
        leaf,
        lambda kids: st.builds(
            Node,
            agent=st.sampled_from(WORKERS),
            follow_ups=st.integers(0, 2),
            children=st.lists(kids, max_size=3).map(tuple),
            delegates=delegates(),
        ),
        max_leaves=7,
    )
    return st.builds(
        Node,
        agent=st.just("main"),
        children=st.lists(nested, max_size=3).map(tuple),
        delegates=delegates(),
    )


def depth_of(path: str) -> int:
    """How deep a node sits: ``r`` 0, ``r.1`` 1, ``r.1.d0`` 2."""
    return path.count(".")


def paths(node: Node, path: str = "r") -> Iterator[tuple[str, Node]]:
    yield path, node
    for index, child in enumerate(node.children):
        yield from paths(child, f"{path}.{index}")
    for index, delegate in enumerate(node.delegates):
        yield f"{path}.d{index}", delegate


@dataclass
class Script:
    """The one model every agent uses: it answers from the request alone (the session's
    task names its node in the tree), so a turn rerun after a crash decides the same; and
    it hangs at the model calls the case crashes at."""

    plan: dict[str, Node]
    crash_at: frozenset[int]
    calls: int = 0
    crashed: asyncio.Event = field(default_factory=asyncio.Event)

    async def reply(self, request: ModelRequest) -> Step:
        self.calls += 1
        if self.calls in self.crash_at:
            self.crashed.set()
            await asyncio.get_running_loop().create_future()  # dies here: never answers
        return self.decide(request)

    def decide(self, request: ModelRequest) -> Step:
        task = next(str(m["content"]) for m in request.messages if m["role"] == "user")
        path = task.removeprefix("task ")
        node = self.plan[path]
        last = request.messages[-1]
        if last["role"] == "tool":
            return f"done {path}"
        text = str(last["content"])
        if "] finish" in text:
            return self.answer_reports(request.system) or f"noted by {path}"
        if text.startswith("follow "):
            return f"done {path} {text}"
        if text == task and (node.children or node.delegates):
            return [
                *(
                    call("sessions_spawn", task=f"task {path}.{i}", agent=child.agent, label=f"{i}")
                    for i, child in enumerate(node.children)
                ),
                *self.delegations(path, node),
            ]
        return f"done {path}"

    def delegations(self, path: str, node: Node) -> list[ScriptedCall]:
        """One ``delegate`` call per role: its tasks as a list (run in parallel) when the
        role has more than one."""
        tasks: dict[str, list[str]] = {}
        for index, delegate in enumerate(node.delegates):
            tasks.setdefault(delegate.agent, []).append(f"task {path}.d{index}")
        return [
            call("delegate", role=role, task=each if len(each) > 1 else each[0])
            for role, each in tasks.items()
        ]

    def answer_reports(self, system: str) -> list[ScriptedCall]:
        """A follow-up for each reported child that is owed one more."""
        sends: list[ScriptedCall] = []
        keys = FROM.findall(system)
        results = list(RESULT.finditer(system))
        for key, result in zip(keys, results, strict=False):
            child = result["path"]
            sent = int(result["k"] or 0)
            if child in self.plan and sent < self.plan[child].follow_ups:
                child_id = key.rsplit("/", 1)[-1]
                sends.append(call("sessions_send", session=child_id, message=f"follow {sent + 1}"))
        return sends


@dataclass
class Outcome:
    sent: list[tuple[str | None, str]] = field(default_factory=list)
    generations: int = 0


async def abandon(bot: Clawbot) -> None:
    """Kill a Clawbot as a crash would: cancel every task of clawbot's where it stands
    (rounds, since a cancelled turn may start the next one on its way out), let go of its
    intake journal unwritten, then drop its database connection."""
    current = asyncio.current_task()
    for _ in range(50):
        tasks = [
            t
            for t in asyncio.all_tasks()
            if t is not current and "/clawbot/" in t.get_coro().cr_code.co_filename  # type: ignore[union-attr]
        ]
        if not tasks:
            break
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks, timeout=5)
    sqlite_store(bot).pending.abandon()
    await sqlite_store(bot).database.abandon()


def worker(agent_id: str, model: str) -> AgentSpec:
    return AgentSpec(
        agent_id=agent_id,
        name=agent_id,
        model=model,
        tools=ToolPolicy(allow=("sessions_spawn", "sessions_send", "sessions_list", "delegate")),
        subagents=SubagentPolicy(allow=WORKERS),
    )


async def run_case(home: Path, tree: Node, crash_at: frozenset[int]) -> None:
    plan = dict(paths(tree))
    script = Script(plan, crash_at)
    main = ScriptedModel(name="test", function=script.reply, record=False)
    workers = ScriptedModel(name="worker", function=script.reply, record=False)
    config = Settings(
        home=home,
        model=main.model_string,
        retry_backoff=0,
        max_spawn_depth=MAX_DEPTH,
        max_children=MAX_CHILDREN,
        max_hops=MAX_HOPS,
        _env_file=None,  # type: ignore[call-arg]
    )
    clock = ManualClock()
    channels: list[MemoryChannel] = []
    abandoned: list[Clawbot] = []
    with main.installed(), workers.installed():
        for generation in range(MAX_CRASHES + 2):
            script.crashed.clear()
            bot = await Clawbot.open(config, clock=clock)
            channel = MemoryChannel()
            channels.append(channel)
            bot.connect(channel)
            if generation == 0:
                for agent_id in WORKERS:
                    await bot.agents.create(worker(agent_id, workers.model_string))
                await bot.router.receive(channel.message("task r"))
            else:
                await bot.start()
            idle = asyncio.ensure_future(bot.scheduler.wait_idle())
            crash = asyncio.ensure_future(script.crashed.wait())
            done, _ = await asyncio.wait(
                {idle, crash}, timeout=CASE_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
            )
            assert done, f"generation {generation} neither ended nor crashed: {tree}"
            idle.cancel()
            crash.cancel()
            if crash in done and not idle.done():
                await abandon(bot)
                abandoned.append(bot)
                clock.advance(config.job_lease + 1)
                continue
            await check(bot, plan, script, channels, tree)
            await bot.close()
            break
        else:
            raise AssertionError(f"more generations than crashes: {tree} {sorted(crash_at)}")
        # One more start finds nothing left to do and reports nothing again.
        calls = script.calls
        async with await Clawbot.open(config, clock=clock) as again:
            last = MemoryChannel()
            again.connect(last)
            await again.start()
            await asyncio.wait_for(again.scheduler.wait_idle(), CASE_TIMEOUT)
            await check(again, plan, script, [*channels, last], tree)
        assert script.calls == calls and last.sent == []


async def check(
    bot: Clawbot, plan: dict[str, Node], script: Script, channels: list[MemoryChannel], tree: Node
) -> None:
    store = bot.store
    # 1. Platform sends from internal sessions: none. Only the root's replies go out, and
    # the person's message got its answer.
    for channel in channels:
        for message in channel.sent:
            assert message.session_key == ROOT_KEY, (message, tree)
    assert any(channel.sent for channel in channels), tree
    # 2. Every child turn's result reaches its parent exactly once.
    sessions = [ROOT_KEY]
    children: dict[str, list[str]] = {}
    index = 0
    while index < len(sessions):
        kids = [s.key for s in await store.sessions.children(sessions[index])]
        children[sessions[index]] = kids
        sessions.extend(kids)
        index += 1
    infos: dict[str, ChildInfo] = {}
    for key in sessions[1:]:
        session = await store.sessions.get(key)
        assert session is not None
        info = ChildInfo.of(session)
        assert info is not None, (key, tree)
        infos[key] = info
    reported: Counter[str] = Counter()
    for key in sessions:
        for entry in await store.transcripts.load(key, 0):
            for meta in headers_of([entry]):
                if ANNOUNCE_META in meta:
                    payload = AnnouncePayload.model_validate(meta[ANNOUNCE_META])
                    assert payload.source_session_key in children[key], (payload, tree)
                    assert not infos[payload.source_session_key].delegated, (payload, tree)
                    reported[payload.source_run_id] += 1
    owed: set[str] = set()
    done: set[str] = set()
    for key in sessions:
        for job in await store.jobs.for_session(key):
            # 3. Every run ended.
            assert job.status in FINISHED, (key, job, tree)
            if job.status == "done":
                done.add(key)
            run = await store.injections.child_run(job.id) if key != ROOT_KEY else None
            if run is not None and run.merged_into is None:
                owed.add(job.id)
    assert {job_id: reported[job_id] for job_id in owed} == dict.fromkeys(owed, 1), tree
    assert set(reported) <= owed, (reported, owed, tree)
    assert ROOT_KEY in done, tree
    # A delegate's answer is its parent's tool result, once: every delegate call a stored
    # turn made has one result, with one answer for each of its tasks (none past the depth
    # limit), and no task is answered twice. (A crash that cut a call short stored neither
    # the call nor a result; the turn, resumed, decides again.)
    path_of = {
        ROOT_KEY: "r",
        **{key: info.task.removeprefix("task ") for key, info in infos.items()},
    }
    for key in sessions:
        entries = await store.transcripts.load(key, 0)
        calls = {c.id: c for e in entries for c in e.tool_calls if c.name == "delegate"}
        results: Counter[str] = Counter()
        answered: Counter[str] = Counter()
        allowed = depth_of(path_of[key]) < MAX_DEPTH
        for entry in entries:
            for block in entry.content:
                if isinstance(block, ToolResultBlock) and block.tool_call_id in calls:
                    results[block.tool_call_id] += 1
                    answered.update(DONE.findall(block.content))
        assert results == dict.fromkeys(calls, 1), (key, calls, results, tree)
        for made in calls.values():
            tasks = made.arguments["task"]
            for task in [tasks] if isinstance(tasks, str) else tasks:
                expected = 1 if allowed else 0
                assert answered[task.removeprefix("task ")] == expected, (key, task, tree)
        assert all(count == 1 for count in answered.values()), (key, answered, tree)
        assert all(task.startswith(f"{path_of[key]}.d") for task in answered), (key, tree)
    # 3. ...within the limits: depth, children, hops; and a bounded number of model calls.
    for key, info in infos.items():
        assert 1 <= info.depth <= MAX_DEPTH, (key, info, tree)
    for key, kids in children.items():
        node = plan[path_of[key]]
        spawned = [kid for kid in kids if not infos[kid].delegated]
        assert len(spawned) <= len(node.children), (key, kids, tree)
        delegated = len(kids) - len(spawned)
        assert delegated <= (MAX_CRASHES + 1) * len(node.delegates), (key, kids, tree)
    hops = await sqlite_store(bot).database.fetchall("SELECT hop FROM injections")
    assert all(hop <= MAX_HOPS for (hop,) in hops), (hops, tree)
    nodes = len(plan)
    follow_ups = sum(node.follow_ups for node in plan.values())
    assert script.calls <= (MAX_CRASHES + 1) * 4 * (nodes + follow_ups), (script.calls, tree)


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    tree=trees(),
    crash_at=st.lists(st.integers(1, 30), max_size=MAX_CRASHES, unique=True).map(frozenset),
)
# A crash at the first model call: the person's message is only in the intake journal.
@example(tree=Node("main", children=(Node("w1"),)), crash_at=frozenset({1}))
# Crashes while delegates run, one of them a parallel list of tasks.
@example(
    tree=Node("main", children=(Node("w2"),), delegates=(Node("w1"), Node("w1"), Node("checker"))),
    crash_at=frozenset({2, 4}),
)
def test_random_subagent_trees_with_crashes_keep_the_invariants(
    tree: Node, crash_at: frozenset[int]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(run_case(Path(folder) / "home", tree, crash_at))


# Found by the property test: a turn rerun after a crash that came after its spawn ran but
# before the tool's result was stored spawned a second child, which reported twice.


async def test_a_spawn_rerun_by_the_same_turn_finds_the_child_it_made(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    scripted.default_text = "finished"
    parent = await bot.router.session_for(channel.message("x"))
    origin = TurnOrigin.of(parent, "turn_1", ())
    first = await bot.subagents.spawn(parent, "find it", origin, label="l", turn_id="turn_1")
    again = await bot.subagents.spawn(parent, "find it", origin, label="l", turn_id="turn_1")
    other = await bot.subagents.spawn(parent, "find it", origin, label="l", turn_id="turn_2")
    await bot.scheduler.wait_idle()

    assert again == first and other.child_id != first.child_id
    kids = await bot.store.sessions.children(parent.key)
    assert sorted(k.key for k in kids) == sorted([first.key, other.key])
    tasks = [e for e in await bot.store.transcripts.load(first.key, 0) if e.role == "user"]
    assert [e.text for e in tasks] == ["find it"]
    stored = await bot.store.transcripts.load(parent.key, 0)
    reports = [meta for meta in headers_of(stored) if ANNOUNCE_META in meta]
    assert len(reports) == 2  # one per child, merged into one turn or not


async def test_a_rerun_spawn_stores_the_task_a_crash_kept_from_the_child(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    parent = await bot.router.session_for(channel.message("x"))
    origin = TurnOrigin.of(parent, "turn_1", ())
    child_id = spawn_id(parent.key, "turn_1", "main", "find it", None, None)
    info = ChildInfo(
        child_id=child_id,
        parent_key=parent.key,
        label="find it",
        task="find it",
        depth=1,
        timeout=300.0,
    )
    # The crash came after the child session was written, before its task was.
    await bot.store.sessions.create(
        Session(
            key=child_key(parent.key, child_id),
            channel=INTERNAL_CHANNEL,
            chat_id=child_id,
            agent_id="main",
            deliver=False,
            owner_key=parent.key,
            meta={CHILD_META: info.model_dump(mode="json")},
        )
    )

    spawned = await bot.subagents.spawn(parent, "find it", origin, turn_id="turn_1")
    await bot.scheduler.wait_idle()

    assert spawned.child_id == child_id
    tasks = [e for e in await bot.store.transcripts.load(spawned.key, 0) if e.role == "user"]
    assert [e.text for e in tasks] == ["find it"]
    assert len(await bot.store.sessions.children(parent.key)) == 1
