"""Subagents, measured: a parent fans out children (each two tool rounds on a scripted model
whose calls take 20 ms) and collects their reports; then the same fan-out through
``delegate`` in parallel.

    python bench/bench_subagents.py                 # 100 children, 20 ms model calls
    python bench/bench_subagents.py --children 10   # a quicker look

Prints the spawn->announce framework overhead per child run: from the child's task stored
to its report stored in the parent, less the time the child spent in its model calls
(``litellm.acompletion``, the scripted model's 20 ms inside it). Measured one child at a
time (the overhead of a run) and under the fan-out of N (where it also holds the wait for
the event loop behind the other N-1 children). Then the framework's CPU per child run (the
process's CPU during the fan-out less a bare litellm replay of the very same model calls),
children completed per second, memory per idle child session (RSS after the fan-out less
RSS before, over N), and the delegate fan-out's wall time and children per second.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clawbot.agents.profiles import AgentSpec
from clawbot.app import Clawbot
from clawbot.settings import Settings
from clawbot.store import SqliteStore
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel, Step, call

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pipeline import Request, flush_litellm_logging

DELEGATE_TASKS_PER_CALL = 20
"""The delegate tool takes at most 20 tasks a call: the fan-out is several calls."""
SOLO_RUNS = 30
"""Children spawned one at a time, for the overhead of a run without contention."""


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def rss_bytes() -> int:
    """The process's resident memory now (not its peak)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Worker:
    """The children's model: two tool rounds, then an answer; each call takes ``delay``."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def reply(self, request: ModelRequest) -> Step:
        await asyncio.sleep(self.delay)
        task = next(str(m["content"]) for m in request.messages if m["role"] == "user")
        rounds = len(request.tool_results)
        if rounds < 2:
            return call("list_dir", path="agents/worker" if rounds == 0 else "agents/worker/")
        return f"result of {task}"


class ModelCalls:
    """Wraps ``litellm.acompletion``: the seconds each child spent in its model calls (by
    its task, the first user message) and, while ``recording``, the requests made, to
    replay them bare."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.requests: list[Request] = []
        self.recording = False
        self.original: Any = None

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        messages = kwargs["messages"]
        task = next((str(m["content"]) for m in messages if m["role"] == "user"), "")
        if self.recording:
            self.requests.append(Request(kwargs["model"], messages, kwargs.get("tools")))
        started = time.perf_counter()
        try:
            return await self.original(*args, **kwargs)
        finally:
            self.seconds[task] += time.perf_counter() - started

    async def bare_cpu(self) -> float:
        """CPU seconds the recorded requests take straight through litellm, made as
        concurrently as the fan-out made them."""
        await flush_litellm_logging()
        before = time.process_time()

        async def one(request: Request) -> None:
            kwargs = {"tools": request.tools} if request.tools else {}
            await self.original(model=request.model, messages=request.messages, **kwargs)

        await asyncio.gather(*(one(request) for request in self.requests))
        await flush_litellm_logging()
        return time.process_time() - before


async def fan_out(bot: Clawbot, channel: MemoryChannel, text: str = "fan out") -> float:
    """The parent spawns its children in one reply and takes their reports."""
    started = time.perf_counter()
    await bot.router.receive(channel.message(text))
    await bot.scheduler.wait_idle()
    return time.perf_counter() - started


async def spawn_to_announce(bot: Clawbot) -> dict[str, float]:
    """Seconds from each child's task stored to its report stored, by child key."""
    assert isinstance(bot.store, SqliteStore)
    rows = await bot.store.database.fetchall(
        "SELECT kind, source_key, target_key, created_at FROM injections"
        " WHERE kind IN ('task', 'announce')"
    )
    tasked: dict[str, datetime] = {}
    reported: dict[str, datetime] = {}
    for kind, source, target, created in rows:
        if kind == "task":
            tasked[target] = datetime.fromisoformat(created)
        else:
            reported[source] = datetime.fromisoformat(created)
    return {key: (reported[key] - tasked[key]).total_seconds() for key in reported}


async def run(children: int, delay: float) -> None:
    import litellm

    worker = Worker(delay)
    worker_model = ScriptedModel(name="bench-worker", function=worker.reply, record=False)

    def parent_reply(request: ModelRequest) -> Step:
        last = request.messages[-1]
        text = str(last["content"]) if last["role"] == "user" else ""
        if text == "warm up":
            return [call("sessions_spawn", task=f"warm {n}", agent="worker") for n in range(2)]
        if text.startswith("solo "):
            return call("sessions_spawn", task=text, agent="worker")
        if text == "fan out":
            return [
                call("sessions_spawn", task=f"task {n}", agent="worker", label=f"t{n}")
                for n in range(children)
            ]
        if text == "delegate":
            tasks = [f"delegated {n}" for n in range(children)]
            return [
                call("delegate", role="worker", task=tasks[i : i + DELEGATE_TASKS_PER_CALL])
                for i in range(0, children, DELEGATE_TASKS_PER_CALL)
            ]
        return "noted"

    parent_model = ScriptedModel(name="bench-parent", function=parent_reply, record=False)
    calls = ModelCalls()
    with (
        tempfile.TemporaryDirectory() as folder,
        parent_model.installed(),
        worker_model.installed(),
    ):
        settings = Settings(
            home=Path(folder) / "home",
            model=parent_model.model_string,
            max_children=min(100, max(children, 1)),
            rate_limit_per_minute=0,  # a load test, not a person typing
            autonomy="full",  # nobody is there to approve
            lane_subagent=children,
            max_active_turns=children + 8,
            max_concurrent=min(32, DELEGATE_TASKS_PER_CALL),
            _env_file=None,  # type: ignore[call-arg]
        )
        calls.original = litellm.acompletion
        litellm.acompletion = calls
        try:
            async with await Clawbot.open(settings) as bot:
                channel = MemoryChannel()
                bot.connect(channel)
                await bot.agents.create(
                    AgentSpec(agent_id="worker", name="worker", model=worker_model.model_string)
                )
                # Warm up: litellm's first call and the code paths, outside the figures.
                await fan_out(bot, channel, "warm up")
                for n in range(SOLO_RUNS):
                    await fan_out(bot, channel, f"solo {n}")

                gc.collect()
                rss_before = rss_bytes()
                calls.recording = True
                cpu_before = time.process_time()
                wall = await fan_out(bot, channel)
                cpu = time.process_time() - cpu_before
                calls.recording = False
                gc.collect()
                rss_after = rss_bytes()
                bare_cpu = await calls.bare_cpu()

                latencies = await spawn_to_announce(bot)
                kids = await bot.store.sessions.children(f"{channel.name}:chat1")
                task_of = {k.key: str(k.meta["subagent"]["task"]) for k in kids}

                def overheads(prefix: str) -> list[float]:
                    return [
                        (seconds - calls.seconds[task_of[key]]) * 1000
                        for key, seconds in latencies.items()
                        if task_of.get(key, "").startswith(prefix)
                    ]

                solo, fanned = overheads("solo "), overheads("task ")
                fanned_children = len(fanned)
                model_ms = statistics.mean(
                    calls.seconds[t] for t in task_of.values() if t.startswith("task ")
                )

                delegated = "delegate: not built yet"
                if "delegate" in bot.tools.names():
                    cpu_before = time.process_time()
                    started = time.perf_counter()
                    await bot.router.handle(channel.message("delegate"))
                    await bot.scheduler.wait_idle()
                    d_wall = time.perf_counter() - started
                    d_cpu = time.process_time() - cpu_before
                    rounds = -(-children // DELEGATE_TASKS_PER_CALL)
                    delegated = (
                        f"delegate: {children} tasks in {rounds} calls of up to "
                        f"{DELEGATE_TASKS_PER_CALL} (each call's tasks in parallel, "
                        f"max_concurrent {settings.max_concurrent}): {d_wall:.2f} s, "
                        f"{children / d_wall:.0f} children/s, "
                        f"{d_cpu / children * 1000:.2f} ms CPU per child"
                    )
        finally:
            litellm.acompletion = calls.original

    per_child = max(children, 1)
    print(f"children                       {fanned_children} of {children} reported")
    print(
        f"model time per child           {model_ms * 1000:8.1f} ms  (3 calls of "
        f"{delay * 1000:.0f} ms, in litellm.acompletion)"
    )
    print(
        f"spawn->announce overhead       p50 {percentile(solo, 0.5):7.2f} ms"
        f"   p99 {percentile(solo, 0.99):7.2f} ms  (one child at a time, {len(solo)} runs;"
        " less the child's model time)"
    )
    print(
        f"  under the fan-out of {children:<8} p50 {percentile(fanned, 0.5):7.2f} ms"
        f"   p99 {percentile(fanned, 0.99):7.2f} ms  (also waiting for the loop behind the"
        " other children)"
    )
    print(
        f"framework CPU per child run    {(cpu - bare_cpu) / per_child * 1000:8.2f} ms"
        f"  ({cpu / per_child * 1000:.2f} ms in all, less {bare_cpu / per_child * 1000:.2f} ms"
        f" for its {len(calls.requests) / per_child:.1f} model calls made bare)"
    )
    print(f"children completed per second  {children / wall:8.0f}  ({wall:.2f} s in all)")
    print(f"memory per idle child session  {(rss_after - rss_before) / per_child / 1024:8.1f} KB")
    print(delegated)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=100)
    parser.add_argument("--delay", type=float, default=0.02, help="seconds per model call")
    args = parser.parse_args()
    asyncio.run(run(args.children, args.delay))


if __name__ == "__main__":
    main()
