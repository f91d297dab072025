"""Scheduled tasks, measured: 10,000 tasks in the database, the bot idle between their due
times, then a batch coming due.

    python bench/bench_schedules.py                  # 10,000 tasks, 30 s idle, 200 due
    python bench/bench_schedules.py --idle 5         # a quicker look

Prints the whole bot's CPU while it waits (its schedule loop, the scheduler's housekeeping:
process CPU time over wall time, goal under 1 %) with 10,000 tasks none of which is due in
the window, and the lateness of the tasks that come due: from a task's due time to its
prompt reaching the model (the scripted model, answering at once), p50, p99 and the worst
(goal: p99 under 1 s). The bot runs on the real clock with its real loop: nothing calls
``tick`` by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clawbot.app import Clawbot
from clawbot.routing.sessions import Session
from clawbot.schedules.records import ScheduledTask
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel

TASK_ID = re.compile(r"\[Scheduled task (\S+)\]")
TASKS_PER_SESSION = 10


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def main(args: argparse.Namespace) -> None:
    arrived: dict[str, float] = {}  # task id -> wall time its prompt reached the model

    def answer(request: ModelRequest) -> str:
        found = TASK_ID.search(request.last_user_text)
        if found:
            arrived.setdefault(found.group(1), time.time())
        return "done"

    model = ScriptedModel(name="bench-schedules", function=answer, record=False)
    with tempfile.TemporaryDirectory() as home, model.installed():
        settings = Settings(
            home=Path(home),
            model=model.model_string,
            schedules_per_session=TASKS_PER_SESSION + 1,
            _env_file=None,  # type: ignore[call-arg]
        )
        async with await Clawbot.open(settings) as bot:
            bot.connect(MemoryChannel())
            now = datetime.now(UTC)
            sessions = max(1, args.tasks // TASKS_PER_SESSION)
            for n in range(sessions):
                await bot.store.sessions.create(
                    Session(key=f"memory:c{n}", channel="memory", chat_id=f"c{n}", agent_id="main")
                )
            for n in range(args.tasks):
                later = now + timedelta(days=1, seconds=n)  # none due in the idle window
                await bot.store.schedules.create(_task(f"sch_idle{n}", n % sessions, later), cap=99)
            await bot.start()
            await asyncio.sleep(1)  # the loop's first round over the database
            cpu, wall = time.process_time(), time.monotonic()
            await asyncio.sleep(args.idle)
            idle_cpu = (time.process_time() - cpu) / (time.monotonic() - wall)
            print(f"idle CPU with {args.tasks:,} tasks over {args.idle:g} s: {idle_cpu:.2%}")

            start = datetime.now(UTC) + timedelta(seconds=1)
            due: dict[str, datetime] = {}
            for n in range(args.due):
                at = start + timedelta(seconds=args.spread * n / max(1, args.due))
                task = _task(f"sch_due{n}", n % sessions, at)
                await bot.store.schedules.create(task, cap=99)
                due[task.id] = at
            bot.schedules.wake()  # as a new task does (created here below the book)
            deadline = time.monotonic() + args.spread + 30
            while len(arrived) < len(due) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            await bot.scheduler.wait_idle()
            late = [arrived[t] - due[t].timestamp() for t in due if t in arrived]
            print(f"{len(late)} of {len(due)} due tasks ran, spread over {args.spread:g} s")
            if late:
                print(
                    f"lateness: p50 {percentile(late, 0.5) * 1000:.0f} ms, "
                    f"p99 {percentile(late, 0.99) * 1000:.0f} ms, worst {max(late) * 1000:.0f} ms"
                )


def _task(task_id: str, session: int, next_run: datetime) -> ScheduledTask:
    return ScheduledTask(
        id=task_id,
        session_key=f"memory:c{session}",
        agent_id="main",
        kind="interval",
        spec="86400",
        tz="UTC",
        prompt="the daily summary",
        status="active",
        next_run=next_run,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000, help="tasks not due (idle)")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of idle measured")
    parser.add_argument("--due", type=int, default=200, help="tasks that come due")
    parser.add_argument("--spread", type=float, default=10.0, help="seconds they come due over")
    asyncio.run(main(parser.parse_args()))
