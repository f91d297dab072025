"""Subagents, measured: a parent fans out children (each two tool rounds on a scripted model
whose calls take 20 ms) and collects their reports; then the same fan-out through
``delegate`` in parallel.

    python bench/bench_subagents.py                 # 100 children, 20 ms model calls
    python bench/bench_subagents.py --children 10   # a quicker look

Prints the spawn->announce framework overhead per child (p50/p99: from the child's task
stored to its report stored in the parent, less the child's own model time; under a
fan-out of N this includes waiting for the event loop behind the other children), the CPU
the process spent per child run, children completed per second, memory per idle child
session (RSS after the fan-out less RSS before, over N), and the delegate fan-out's wall
time and children per second.
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

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clawbot.agents import AgentSpec
from clawbot.app import Clawbot
from clawbot.settings import Settings
from clawbot.store import SqliteStore
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel, Step, call

DELEGATE_TASKS_PER_CALL = 20
"""The delegate tool takes at most 20 tasks a call: the fan-out is several calls."""


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def rss_bytes() -> int:
    """The process's resident memory now (not its peak)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Worker:
    """The children's model: two tool rounds, then an answer; each call takes ``delay``.
    Keeps each child's model time (by its task) so the framework's share can be told."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.model_seconds: dict[str, float] = defaultdict(float)

    async def reply(self, request: ModelRequest) -> Step:
        started = time.perf_counter()
        await asyncio.sleep(self.delay)
        task = next(str(m["content"]) for m in request.messages if m["role"] == "user")
        self.model_seconds[task] += time.perf_counter() - started
        rounds = len(request.tool_results)
        if rounds < 2:
            return call("list_dir", path="." if rounds == 0 else "./")
        return f"result of {task}"


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
    worker = Worker(delay)
    worker_model = ScriptedModel(name="bench-worker", function=worker.reply, record=False)

    def parent_reply(request: ModelRequest) -> Step:
        last = request.messages[-1]
        if last["role"] == "user" and last["content"] == "warm up":
            return [call("sessions_spawn", task=f"warm {n}", agent="worker") for n in range(2)]
        if last["role"] == "user" and last["content"] == "fan out":
            return [
                call("sessions_spawn", task=f"task {n}", agent="worker", label=f"t{n}")
                for n in range(children)
            ]
        if last["role"] == "user" and last["content"] == "delegate":
            tasks = [f"delegated {n}" for n in range(children)]
            return [
                call("delegate", role="worker", task=tasks[i : i + DELEGATE_TASKS_PER_CALL])
                for i in range(0, children, DELEGATE_TASKS_PER_CALL)
            ]
        return "noted"

    parent_model = ScriptedModel(name="bench-parent", function=parent_reply, record=False)
    with (
        tempfile.TemporaryDirectory() as folder,
        parent_model.installed(),
        worker_model.installed(),
    ):
        settings = Settings(
            home=Path(folder) / "home",
            model=parent_model.model_string,
            max_children=min(100, max(children, 1)),
            lane_subagent=children,
            max_active_turns=children + 8,
            max_concurrent=min(32, DELEGATE_TASKS_PER_CALL),
            _env_file=None,  # type: ignore[call-arg]
        )
        async with await Clawbot.open(settings) as bot:
            channel = MemoryChannel()
            bot.connect(channel)
            await bot.agents.create(
                AgentSpec(agent_id="worker", name="worker", model=worker_model.model_string)
            )
            # Warm up: litellm's first call and the code paths, outside the figures.
            await fan_out(bot, channel, "warm up")
            worker.model_seconds.clear()
            gc.collect()
            rss_before = rss_bytes()
            cpu_before = time.process_time()
            wall = await fan_out(bot, channel)
            cpu = time.process_time() - cpu_before
            gc.collect()
            rss_after = rss_bytes()
            latencies = await spawn_to_announce(bot)
            kids = await bot.store.sessions.children(f"{channel.name}:chat1")
            tasks = {k.key: k.meta["subagent"]["task"] for k in kids}
            tasks = {key: task for key, task in tasks.items() if task.startswith("task ")}
            latencies = {key: latencies[key] for key in tasks if key in latencies}
            overheads = [
                (seconds - worker.model_seconds[tasks[key]]) * 1000
                for key, seconds in latencies.items()
            ]
            model_ms = statistics.mean(worker.model_seconds[t] for t in tasks.values()) * 1000

            delegated = "delegate: not built yet"
            if "delegate" in bot.tools.names():
                cpu_before = time.process_time()
                started = time.perf_counter()
                await bot.router.handle(channel.message("delegate"))
                await bot.scheduler.wait_idle()
                d_wall = time.perf_counter() - started
                d_cpu = time.process_time() - cpu_before
                calls = -(-children // DELEGATE_TASKS_PER_CALL)
                delegated = (
                    f"delegate: {children} tasks in {calls} calls of up to "
                    f"{DELEGATE_TASKS_PER_CALL} (each call's tasks in parallel, max_concurrent "
                    f"{settings.max_concurrent}): {d_wall:.2f} s, "
                    f"{children / d_wall:.0f} children/s, {d_cpu / children * 1000:.2f} ms CPU "
                    "per child"
                )

    print(f"children                       {len(latencies)} of {children} reported")
    print(f"model time per child           {model_ms:8.1f} ms  (3 calls of {delay * 1000:.0f} ms)")
    print(
        f"spawn->announce overhead       p50 {percentile(overheads, 0.5):7.2f} ms"
        f"   p99 {percentile(overheads, 0.99):7.2f} ms  (less the child's model time)"
    )
    print(f"CPU per child run              {cpu / max(children, 1) * 1000:8.2f} ms")
    print(f"children completed per second  {children / wall:8.0f}  ({wall:.2f} s in all)")
    print(
        f"memory per idle child session  {(rss_after - rss_before) / max(children, 1) / 1024:8.1f} KB"
    )
    print(delegated)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=100)
    parser.add_argument("--delay", type=float, default=0.02, help="seconds per model call")
    args = parser.parse_args()
    asyncio.run(run(args.children, args.delay))


if __name__ == "__main__":
    main()
