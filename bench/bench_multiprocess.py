"""Past one process (issue 32): the pipeline on PostgreSQL beside SQLite, then 1, 2 and 3
``clawbot run`` processes on one PostgreSQL database with a model that takes 20 ms.

    .venv/bin/python bench/bench_multiprocess.py                  # the figures docs quote
    .venv/bin/python bench/bench_multiprocess.py --sessions 20    # a quicker look

1. The in-process pipeline (``bench_pipeline.pipeline``: sessions x turns, a scripted model
   that answers at once) on the home's SQLite file, then on a PostgreSQL server started in a
   temporary folder (tests/postgres_server.py): turns/s, p50/p99 turn time, and PostgreSQL's
   rate over SQLite's (goal: at least 0.70).
2. The deployment: N ``clawbot run`` processes, each with a home of its own and the same
   database, behind the Telegram stand-in's webhook and its load balancer (tests/fleet.py);
   the model is the OpenAI-compatible stand-in answering after ``--model-ms``.
   ``--sessions`` people at once each send a message and wait for its answer,
   ``--messages`` times after one unmeasured warm-up, each message from a chat of its own
   (clawbot sends to one chat at most once a second, Telegram's limit, which would be the
   wait otherwise; the stand-in's own flood limits are off). A process runs ``--lane`` turns
   at once (its ``CLAWBOT_LANE_MAIN``), so with a slow enough model the model is the wait
   and a second process doubles what can wait at once. Prints turns/s and p50/p99 from a
   message reaching Telegram to its answer reaching Telegram, for 1 process on SQLite and
   1..``--processes`` on PostgreSQL, and each rate over one process's (goal: 2 processes at
   least 1.6x one).

A line whose processes do not all start (a clawbot that refuses a second process on one
database) is printed as refused, with the reason.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pipeline import Run, percentile, pipeline

from clawbot.providers import litellm_module
from clawbot.testing import ScriptedModel
from tests.fleet import Fleet
from tests.postgres_server import PostgresServer
from tests.spawned import kill_leftovers
from tests.standins.openai_api import OpenAIStandin
from tests.standins.rate_rules import TokenBucket
from tests.standins.telegram import TelegramHarness, TelegramRates

TAG = re.compile(r"m(\d+)n(\d+)\b")
NO_FLOOD_LIMIT = TokenBucket(per_second=1e9, burst=10**9)


def line(name: str, rate: float, seconds: list[float], extra: str = "") -> None:
    p50 = percentile(seconds, 0.50) * 1000
    p99 = percentile(seconds, 0.99) * 1000
    print(f"  {name:<24} {rate:8.1f} turns/s   p50 {p50:8.2f} ms   p99 {p99:8.2f} ms{extra}")


async def in_process(sessions: int, turns: int, server: PostgresServer) -> tuple[Run, Run]:
    model = ScriptedModel(name="bench", default_text="Fine, thanks.", record=False)
    with model.installed():
        litellm_module()
        with tempfile.TemporaryDirectory() as home:
            sqlite = await pipeline(Path(home), model, sessions, turns, 60)
        with tempfile.TemporaryDirectory() as home:
            postgres = await pipeline(
                Path(home), model, sessions, turns, 60, database_url=server.new_database()
            )
    return sqlite, postgres


@dataclass
class Answers:
    """The answers Telegram saw, by tag, as they arrive (on the test loop)."""

    waiting: dict[str, asyncio.Future[float]] = field(default_factory=dict)

    def expect(self, tag: str) -> asyncio.Future[float]:
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiting[tag] = future
        return future

    def on_result(self, method: str, params: dict[str, Any], result: Any) -> None:
        if method != "sendMessage":
            return
        for match in TAG.finditer(str(result["text"])):
            future = self.waiting.pop(match.group(0), None)
            if future is not None and not future.done():
                future.set_result(time.perf_counter())


@dataclass(frozen=True)
class FleetRun:
    rate: float
    latencies: list[float]


async def fleet_run(processes: int, database_url: str | None, args: argparse.Namespace) -> FleetRun:
    """``processes`` processes on one database (each its own SQLite file when None)."""
    harness = TelegramHarness()
    harness.server.rates = TelegramRates(per_chat=NO_FLOOD_LIMIT, per_group=NO_FLOOD_LIMIT)
    answers = Answers()
    harness.server.on_result = answers.on_result
    model = OpenAIStandin()
    model.answer_seconds = args.model_ms / 1000
    await harness.start()
    try:
        with model.running(), tempfile.TemporaryDirectory() as folder:
            settings = {"CLAWBOT_LANE_MAIN": str(args.lane), "CLAWBOT_RATE_LIMIT_PER_MINUTE": "0"}
            fleet = await Fleet.start(
                processes,
                database_url=database_url,
                folder=Path(folder),
                harness=harness,
                model=model,
                seed=0,
                **settings,
            )
            try:
                return await converse(harness, answers, args)
            finally:
                await fleet.terminate()
    finally:
        await kill_leftovers()
        await harness.stop()


async def converse(
    harness: TelegramHarness, answers: Answers, args: argparse.Namespace
) -> FleetRun:
    """``--sessions`` people at once, each sending a message and waiting for its answer,
    ``--messages`` times (after one unmeasured warm-up). Each message comes from a chat of
    its own: clawbot paces what it sends to one chat (a message a second, Telegram's limit),
    so a person's next answer would wait for that second, not for the processes."""
    latencies: list[float] = []
    chats = iter(range(3_000_000, 4_000_000))

    async def person(session: int) -> None:
        for number in range(args.messages + 1):
            tag = f"m{session}n{number}"
            answered = answers.expect(tag)
            sent = time.perf_counter()
            await harness.inject_message(f"question {tag}", sender_id=str(next(chats)))
            arrived = await asyncio.wait_for(answered, 120)
            if number:  # the first is the warm-up
                latencies.append(arrived - sent)
                starts.append(sent)

    starts: list[float] = []
    await asyncio.gather(*(person(s) for s in range(args.sessions)))
    seconds = time.perf_counter() - min(starts)
    return FleetRun(rate=len(latencies) / seconds, latencies=latencies)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=60)
    parser.add_argument("--turns", type=int, default=5, help="in-process pipeline turns")
    parser.add_argument("--messages", type=int, default=10, help="each person's, per fleet")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--model-ms", type=float, default=20.0)
    parser.add_argument(
        "--lane",
        type=int,
        default=1,
        help="CLAWBOT_LANE_MAIN per process (1: the model is the wait)",
    )
    args = parser.parse_args()
    server = PostgresServer()
    server.start()
    try:
        sqlite, postgres = await in_process(args.sessions, args.turns, server)
        print(f"in-process pipeline: {args.sessions} sessions x {args.turns} turns, model 0 ms")
        line("SQLite", sqlite.rate, sqlite.durations)
        line("PostgreSQL", postgres.rate, postgres.durations)
        print(f"  PostgreSQL / SQLite {postgres.rate / sqlite.rate:8.2f}    (goal >= 0.70)")
        print(
            f"clawbot run processes behind the webhook: {args.sessions} people x "
            f"{args.messages} messages, model {args.model_ms:g} ms, lane {args.lane} per process"
        )
        alone = await fleet_run(1, None, args)
        line("1 process, SQLite", alone.rate, alone.latencies)
        one: float | None = None
        for count in range(1, args.processes + 1):
            name = f"{count} process{'es' if count > 1 else ''}, PostgreSQL"
            try:
                run = await fleet_run(count, server.new_database(), args)
            except (AssertionError, TimeoutError) as exc:
                print(f"  {name:<24} refused: {str(exc).splitlines()[0][:120]}")
                continue
            one = run.rate if count == 1 else one
            ratio = f"   x{run.rate / one:.2f} of one" if one and count > 1 else ""
            line(name, run.rate, run.latencies, ratio)
        print("  goal: 2 processes >= 1.6x one")
    finally:
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())
