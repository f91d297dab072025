"""Scheduling benchmark: prints figures, asserts nothing but the one-turn-per-session rule.

    python bench/bench_scheduling.py [--sessions 200] [--messages 50] [--latency 0.02]

1. burst: every session receives all its messages at once (steer-backlog merges what arrives
   while a turn runs into one [Backlog] turn): throughput, inbound-to-reply p50/p99, and
   the most turns observed active at once in one session (must be 1).
2. conversation: each session sends its next message when the previous reply arrived
   (every message is its own turn): turn throughput and latency under the lane limits.
3. steer latency: while a long tool loop runs (tool calls of --tool seconds), a new message
   arrives at a random moment; time until the model receives it (goal: under one tool call).
4. scheduler cost: the same turn (model and runtime stubbed out, the store real) run inline
   as before the scheduler (accept, run, deliver) and through Router.handle; the difference
   is what scheduling adds per turn. bench_pipeline.py measures the whole pipeline.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from clawbot.app import Clawbot
from clawbot.messages import OutboundMessage, TextBlock, TranscriptEntry
from clawbot.routing.router import _user_entry
from clawbot.routing.sessions import Session
from clawbot.runtime.control import TurnResult
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedCall, ScriptedModel, call
from clawbot.tools.registry import ToolRegistry, make_tool

SESSION = re.compile(r"s(\d+) m\d+")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


class PerSession:
    """Counts model calls in flight per session (a turn's calls are sequential, so this is
    the number of its turns active at once) and overall."""

    def __init__(self) -> None:
        self.active: Counter[str] = Counter()
        self.max_per_session = 0
        self.max_total = 0
        self.total = 0

    def enter(self, request: ModelRequest) -> str:
        match = SESSION.search(request.last_user_text)
        key = match.group(1) if match else "?"
        self.active[key] += 1
        self.total += 1
        self.max_per_session = max(self.max_per_session, self.active[key])
        self.max_total = max(self.max_total, self.total)
        return key

    def leave(self, key: str) -> None:
        self.active[key] -= 1
        self.total -= 1


def settings_for(home: Path, model: ScriptedModel, args: argparse.Namespace) -> Settings:
    return Settings(
        home=home,
        model=model.model_string,
        rate_limit_per_minute=0,  # a load test, not a person typing
        autonomy="full",  # nobody is there to approve
        lane_main=args.lane,
        max_active_turns=args.lane,
        log_level="WARNING",
        _env_file=None,  # type: ignore[call-arg]
    )


async def load(args: argparse.Namespace, *, burst: bool) -> None:
    measure = PerSession()
    turns = 0

    async def answer(request: ModelRequest) -> str:
        nonlocal turns
        key = measure.enter(request)
        turns += 1
        try:
            await asyncio.sleep(args.latency)
            return f"ok {key}"
        finally:
            measure.leave(key)

    model = ScriptedModel(name="bench", function=answer, record=False)
    with tempfile.TemporaryDirectory() as home, model.installed():
        async with await Clawbot.open(settings_for(Path(home), model, args)) as bot:
            channel = MemoryChannel()
            bot.connect(channel)
            await bot.start()
            latencies: list[float] = []

            async def one(session: int, number: int) -> None:
                sent = time.perf_counter()
                await bot.router.handle(
                    channel.message(f"s{session} m{number}", chat_id=f"c{session}")
                )
                latencies.append(time.perf_counter() - sent)

            async def conversation(session: int) -> None:
                for number in range(args.messages):
                    await one(session, number)

            started = time.perf_counter()
            if burst:
                await asyncio.gather(
                    *(one(s, m) for s in range(args.sessions) for m in range(args.messages))
                )
            else:
                await asyncio.gather(*(conversation(s) for s in range(args.sessions)))
            elapsed = time.perf_counter() - started
    count = args.sessions * args.messages
    name = "burst" if burst else "conversation"
    print(
        f"{name:>12}: {count} messages in {elapsed:.2f} s = {count / elapsed:,.0f} msg/s; "
        f"{turns} turns ({turns / elapsed:,.0f} turns/s); inbound->reply "
        f"p50 {percentile(latencies, 50) * 1000:.0f} ms, "
        f"p99 {percentile(latencies, 99) * 1000:.0f} ms; "
        f"max active turns per session {measure.max_per_session}, overall {measure.max_total}"
    )
    assert len(channel.texts) >= 1 and measure.max_per_session == 1


async def steer_latency(args: argparse.Namespace) -> None:
    arrived: dict[str, float] = {}
    started: dict[str, float] = {}

    async def work(step: int) -> str:
        """One step of a long task."""
        await asyncio.sleep(args.tool)
        return f"step {step} done"

    async def answer(request: ModelRequest) -> str | ScriptedCall:
        text = request.last_user_text
        if text.startswith("quick"):
            started.setdefault(text, time.perf_counter())
        await asyncio.sleep(args.latency)
        if text.startswith("quick"):
            return "quick answer"
        if request.messages[-1]["role"] == "tool":
            return call("work", step=len(request.tool_results) + 1)
        return call("work", step=1) if "long task" in text else "ok"

    model = ScriptedModel(name="steer", function=answer, record=False)
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as home, model.installed():
        settings = settings_for(Path(home), model, args).model_copy(update={"max_tool_rounds": 100})
        async with await Clawbot.open(settings, tools=ToolRegistry([make_tool(work)])) as bot:
            channel = MemoryChannel()
            bot.connect(channel)
            await bot.start()
            for trial in range(args.trials):
                chat = f"steer{trial}"
                await bot.router.receive(channel.message("do the long task", chat_id=chat))
                await asyncio.sleep(3 * (args.tool + args.latency) + rng.random() * args.tool)
                text = f"quick question {trial}"
                arrived[text] = time.perf_counter()
                receipt = await bot.router.receive(channel.message(text, chat_id=chat))
                await receipt.wait()
                await bot.router.handle(channel.message("/stop", chat_id=chat))
    delays = [(started[t] - arrived[t]) * 1000 for t in arrived]
    print(
        f"{'steer':>12}: new message -> its turn's model call over {args.trials} trials: "
        f"p50 {statistics.median(delays):.1f} ms, max {max(delays):.1f} ms "
        f"(one tool call takes {args.tool * 1000:.0f} ms, "
        f"one model call {args.latency * 1000:.0f} ms)"
    )


async def scheduler_cost(args: argparse.Namespace) -> None:
    model = ScriptedModel(name="cost", record=False)
    with tempfile.TemporaryDirectory() as home, model.installed():
        async with await Clawbot.open(settings_for(Path(home), model, args)) as bot:
            channel = MemoryChannel()
            bot.connect(channel)
            await bot.start()
            runtime = bot.runtime

            async def stub_turn(session: Session, turn_id: str, **_: object) -> TurnResult:
                transcript = await runtime.transcripts.get(session)
                entry = TranscriptEntry(
                    role="assistant", content=(TextBlock(text="ok"),), turn_id=turn_id
                )
                await runtime.store.jobs.finish(session, turn_id, [entry])
                transcript.append([entry])
                return TurnResult(turn_id=turn_id, status="done", reply="ok", rounds=0)

            runtime.run_turn = stub_turn  # type: ignore[method-assign]
            numbers = iter(range(10**9))

            async def inline() -> None:
                message = channel.message(f"x{next(numbers)}", chat_id="inline")
                session = await bot.router.session_for(message)
                turn_id = await runtime.accept(session, _user_entry(message, turn_id=None))
                assert turn_id is not None
                result = await runtime.run_turn(session, turn_id)
                await bot.outbox.deliver(
                    OutboundMessage(channel=channel.name, chat_id="inline", text=result.reply)
                )

            async def scheduled() -> None:
                message = channel.message(f"y{next(numbers)}", chat_id="scheduled")
                await bot.router.handle(message)

            times: dict[str, list[float]] = {"inline": [], "scheduled": []}
            for _ in range(args.cost_rounds):
                for name, action in (("inline", inline), ("scheduled", scheduled)):
                    times[name].append(1 / await rate(action, 200))
    inline_us = statistics.median(times["inline"]) * 1e6
    scheduled_us = statistics.median(times["scheduled"]) * 1e6
    print(
        f"{'cost':>12}: a stubbed turn takes {inline_us:.0f} us inline, "
        f"{scheduled_us:.0f} us scheduled: scheduling adds {scheduled_us - inline_us:.0f} us "
        "per turn (medians)"
    )


async def rate(action: Callable[[], Awaitable[None]], count: int) -> float:
    for _ in range(10):
        await action()
    started = time.perf_counter()
    for _ in range(count):
        await action()
    return count / (time.perf_counter() - started)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds per model call")
    parser.add_argument("--tool", type=float, default=0.05, help="seconds per tool call")
    parser.add_argument("--lane", type=int, default=64, help="main lane and global limit")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--cost-rounds", type=int, default=10)
    args = parser.parse_args()
    print(
        f"{args.sessions} sessions x {args.messages} messages, "
        f"model calls {args.latency * 1000:.0f} ms, lane_main = max_active_turns = {args.lane}"
    )
    await load(args, burst=True)
    await load(args, burst=False)
    await steer_latency(args)
    await scheduler_cost(args)


if __name__ == "__main__":
    asyncio.run(main())
