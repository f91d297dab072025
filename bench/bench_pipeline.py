"""The whole pipeline, measured: in-process channel -> router -> store -> runtime with a
zero-latency scripted model -> outbox, against the bare litellm call rate to the same model.

    python bench/bench_pipeline.py                 # 1,000 sessions x 10 turns, 1 x 2,000 turns
    python bench/bench_pipeline.py --sessions 100  # a quicker look

Prints turns per second, per-turn framework overhead (turn time minus the model call time,
p50/p99), peak memory (RSS), the bare ``litellm.acompletion`` rate of the same requests (each
round of turns is replayed right after it, so both sides see the same machine), the
ratio of the two, the first/last 10 % turn times of one long session, and ``clawbot --help``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic import SecretStr

from clawbot.app import Clawbot
from clawbot.providers import litellm_module
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ScriptedModel


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def flush_litellm_logging() -> None:
    """litellm defers per-call work (cost and logging payloads) to a background worker on
    the event loop. Both measurements wait for it, so each side is charged what it causes."""
    from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

    await GLOBAL_LOGGING_WORKER.flush()


@dataclass(frozen=True)
class Request:
    """What the pipeline passed to ``litellm.acompletion`` in one call."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None


async def bare_litellm_seconds(acompletion: Any, requests: list[Request]) -> float:
    """Replay the very requests the pipeline made, straight into litellm.acompletion; the
    seconds they took.

    Yielding to the loop after each call lets litellm's background logging run as it does
    in any real application (a scripted model never suspends, so without it the worker
    would only run after the clock stopped)."""
    await flush_litellm_logging()
    started = time.perf_counter()
    for request in requests:
        kwargs = {"tools": request.tools} if request.tools else {}
        await acompletion(model=request.model, messages=request.messages, **kwargs)
        await asyncio.sleep(0)
    await flush_litellm_logging()
    return time.perf_counter() - started


@dataclass
class Run:
    rate: float
    durations: list[float]
    model_times: list[float]
    bare_rate: float | None
    bare_rounds: list[float]  # seconds of each round's bare replay (when replayed)
    rounds: list[float]  # seconds of each round end to end


async def pipeline(
    home: Path,
    model: ScriptedModel,
    sessions: int,
    turns: int,
    history: int,
    *,
    bare_after_each_round: bool = False,
    streaming: bool | None = None,
    database_url: str | None = None,
) -> Run:
    """Run ``sessions`` x ``turns`` sequential turns, one round over every session per turn.

    With ``bare_after_each_round``, each round's requests are replayed straight into
    litellm right after it, so both sides are measured under the same machine conditions
    (on a shared VM the speed drifts over minutes; measuring one side after the other would
    charge that drift to whichever ran in the slower minutes). With ``streaming`` True or
    False, the channel is one that can show a reply while it is written (and shows typing),
    with streaming on or off (``bench_streaming.py``). ``database_url`` puts the store
    there instead of the home's SQLite file (``bench_postgres_pipeline.py``)."""
    settings = Settings(
        home=home,
        model=model.model_string,
        max_history_messages=history,
        rate_limit_per_minute=0,  # a load test, not a person typing
        streaming=bool(streaming),
        database_url=SecretStr(database_url) if database_url else None,
        _env_file=None,
    )  # type: ignore[call-arg]
    durations: list[float] = []
    model_times: list[float] = []
    litellm: Any = litellm_module()
    original = litellm.acompletion

    requests: list[Request] = []

    async def measured(*args: object, **kwargs: Any) -> object:
        requests.append(Request(kwargs["model"], kwargs["messages"], kwargs.get("tools")))
        started = time.perf_counter()
        try:
            return await original(*args, **kwargs)
        finally:
            model_times.append(time.perf_counter() - started)

    litellm.acompletion = measured
    rounds: list[float] = []
    bare_rounds: list[float] = []
    try:
        async with await Clawbot.open(settings) as bot:
            channel = MemoryChannel(live=streaming is not None)
            bot.connect(channel)
            handle = bot.router.handle
            for warm in range(20):
                await handle(channel.message(f"warm {warm}", chat_id="warmup"))
            await flush_litellm_logging()
            durations.clear()
            model_times.clear()
            answered = len(channel.sent)
            channel.sent.clear()
            requests.clear()
            for turn in range(turns):
                started = time.perf_counter()
                for session in range(sessions):
                    message = channel.message(
                        f"message {turn} in session {session}", chat_id=f"chat{session}"
                    )
                    t0 = time.perf_counter()
                    await handle(message)
                    durations.append(time.perf_counter() - t0)
                await flush_litellm_logging()
                rounds.append(time.perf_counter() - started)
                # The harness's records are let go each round (the requests too, below),
                # so the run's memory and collector work are the framework's own.
                answered += len(channel.sent)
                channel.sent.clear()
                if bare_after_each_round:
                    bare_rounds.append(await bare_litellm_seconds(original, requests))
                requests.clear()
            assert answered == sessions * turns + 20, "every turn must be answered"
    finally:
        litellm.acompletion = original
    total = sessions * turns
    return Run(
        rate=total / sum(rounds),
        durations=durations,
        model_times=model_times,
        bare_rate=total / sum(bare_rounds) if bare_after_each_round else None,
        bare_rounds=bare_rounds,
        rounds=rounds,
    )


def help_time() -> float:
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "clawbot", "--help"], capture_output=True, check=True)
        best = min(best, time.perf_counter() - started)
    return best


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--long-turns", type=int, default=2000)
    args = parser.parse_args()

    # The model keeps no record of requests: the pipeline's own are kept for the replay.
    model = ScriptedModel(name="bench", default_text="Fine, thanks.", record=False)
    with model.installed():
        litellm_module()
        total = args.sessions * args.turns
        gc.collect()
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        with tempfile.TemporaryDirectory() as home:
            run = await pipeline(
                Path(home), model, args.sessions, args.turns, 60, bare_after_each_round=True
            )
        rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        rate, durations, bare = run.rate, run.durations, run.bare_rate
        assert bare is not None
        overhead = [d - m for d, m in zip(durations, run.model_times, strict=True)]
        with tempfile.TemporaryDirectory() as home:
            long_run = await pipeline(
                Path(home), model, 1, args.long_turns, 60, bare_after_each_round=True
            )
        long_durations, long_bare = long_run.durations, long_run.bare_rounds
        tenth = max(1, len(long_durations) // 10)
        first = statistics.mean(long_durations[:tenth])
        last = statistics.mean(long_durations[-tenth:])
        # Each turn against the bare call of its own request, replayed right after it: the
        # VM's speed drifts over the run, and this ratio does not.
        first_vs_bare = first / statistics.mean(long_bare[:tenth])
        last_vs_bare = last / statistics.mean(long_bare[-tenth:])

    print(
        f"pipeline: {args.sessions} sessions x {args.turns} turns = {total} turns (Python {sys.version.split()[0]}, {os.cpu_count()} cores)"
    )
    print(f"  end-to-end rate            {rate:8.0f} turns/s")
    print(
        f"  bare litellm.acompletion   {bare:8.0f} calls/s  (the same {total} requests, replayed after each round)"
    )
    print(f"  ratio end-to-end / bare    {rate / bare:8.2f}    (goal >= 0.80)")
    per_round = sorted(
        bare_s / e2e_s for bare_s, e2e_s in zip(run.bare_rounds, run.rounds, strict=True)
    )
    print(
        f"  the ratio round by round   {statistics.median(per_round):8.2f}    (median;"
        f" {per_round[0]:.2f} to {per_round[-1]:.2f} over {len(per_round)} rounds)"
    )
    print(f"  framework overhead p50     {percentile(overhead, 0.50) * 1000:8.3f} ms/turn")
    print(f"  framework overhead p99     {percentile(overhead, 0.99) * 1000:8.3f} ms/turn")
    print(
        f"  turn time p50 / p99        {percentile(durations, 0.5) * 1000:8.3f} / {percentile(durations, 0.99) * 1000:.3f} ms"
    )
    print(
        f"  peak RSS (process)         {rss_peak / 1024:8.1f} MB  (+{(rss_peak - rss_before) / 1024:.1f} MB during the run)"
    )
    print(f"one session x {args.long_turns} turns (history sent: last 60 entries)")
    print(f"  first 10 % mean turn       {first * 1000:8.3f} ms")
    print(f"  last 10 % mean turn        {last * 1000:8.3f} ms")
    print(f"  last / first               {last / first:8.2f}    (goal <= 1.20)")
    print(
        f"  the same, each 10 % relative to bare litellm on its own requests"
        f" {last_vs_bare / first_vs_bare:5.2f}  ({first_vs_bare:.2f}x bare first, {last_vs_bare:.2f}x last)"
    )
    print(f"clawbot --help (best of 5)   {help_time() * 1000:8.0f} ms   (goal < 300 ms)")


if __name__ == "__main__":
    asyncio.run(main())
