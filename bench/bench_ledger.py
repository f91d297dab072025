"""What the usage ledger adds to a model call: the row written (group commit, real SQLite)
and the budgets asked, measured alone and around the real litellm call to a zero-latency
scripted model.

    python bench/bench_ledger.py                # 5,000 calls a side
    python bench/bench_ledger.py --calls 500    # a quicker look

Prints CPU microseconds a call (the process's, all threads) for: recording one row alone;
recording with three budgets configured (allow + record); and ``ModelClient.complete``
without a meter, with one, and with one and budgets (the sides take turns in rounds, their
order turned round each round, so each sees the same machine). The goal is under 100 us a
call.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clawbot.agents.profiles import DEFAULT_AGENT
from clawbot.clock import SystemClock
from clawbot.routing.sessions import Session
from clawbot.runtime.budgets import Budgets
from clawbot.runtime.llm import ModelClient
from clawbot.runtime.metering import UsageMeter, calls_for
from clawbot.runtime.replies import ModelReply
from clawbot.settings import Settings
from clawbot.store import SqliteStore
from clawbot.testing import ScriptedModel, ScriptedUsage

SESSION = Session(key="bench:1", channel="bench", chat_id="1", agent_id="main")
REPLY = ModelReply(
    text="ok", tool_calls=(), usage={"prompt_tokens": 120, "completion_tokens": 8}, cost_usd=2e-5
)
MESSAGES = [{"role": "user", "content": "hello"}]


async def per_call(
    calls: int, work: Callable[[], Awaitable[object]], settle: Callable[[], Awaitable[None]]
) -> float:
    """CPU microseconds (this process's, all its threads) a call of ``work`` takes, over
    ``calls`` calls, with the commit of the rows they left waiting (``settle``), so no side
    pays for another's: on a shared VM, CPU time drifts far less than the wall clock."""
    started = time.process_time()
    for _ in range(calls):
        await work()
    await settle()
    return (time.process_time() - started) / calls * 1e6


async def main(calls: int, rounds: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="clawbot-bench-ledger-"))
    store = await SqliteStore.open(folder / "clawbot.db")
    budgeted = Settings(
        home=folder,
        daily_budget_usd=1e9,
        budget_per_day="$1000000",  # type: ignore[arg-type]
        budget_per_turn="1000000000 tokens",  # type: ignore[arg-type]
        _env_file=None,  # type: ignore[call-arg]
    )
    plain = UsageMeter(store.usage, clock=SystemClock())
    guarded = UsageMeter(
        store.usage,
        clock=SystemClock(),
        budgets=Budgets(budgeted, store.usage, lambda agent_id: DEFAULT_AGENT),
    )
    model = ScriptedModel(name="bench", record=False, usage=ScriptedUsage(120, 8, 2e-5))
    bare, metered, limited = ModelClient(), ModelClient(), ModelClient()
    metered.meter, limited.meter = plain, guarded

    async def record(meter: UsageMeter) -> None:
        await meter.allow()
        await meter.model_answered("scripted/bench", meter.started(), REPLY)

    def complete(client: ModelClient) -> Callable[[], Awaitable[object]]:
        return lambda: client.complete(model.model_string, MESSAGES)

    sides: dict[str, Callable[[], Awaitable[object]]] = {
        "record a row": lambda: record(plain),
        "allow + record, 3 budgets": lambda: record(guarded),
        "complete, no ledger": complete(bare),
        "complete, ledger": complete(metered),
        "complete, ledger + budgets": complete(limited),
    }
    results: dict[str, list[float]] = {name: [] for name in sides}
    with model.installed(), calls_for(SESSION, "turn_bench"):
        await bare.load()
        settle = store.database.write_soon_rows
        for work in sides.values():  # warm up
            await per_call(50, work, settle)
        for round_no in range(rounds):  # the order turns round each round (ABC CBA ...)
            ordered = list(sides.items())
            for name, work in ordered if round_no % 2 == 0 else reversed(ordered):
                results[name].append(await per_call(calls // rounds, work, settle))
    await store.close()

    print(f"{calls:,} calls a side, {rounds} rounds (median of the rounds, CPU time)")
    medians = {name: statistics.median(values) for name, values in results.items()}
    for name, value in medians.items():
        print(f"{name:<28} {value:8.1f} us/call")
    added = medians["complete, ledger"] - medians["complete, no ledger"]
    with_budgets = medians["complete, ledger + budgets"] - medians["complete, no ledger"]
    print(f"{'ledger adds to a call':<28} {added:8.1f} us (goal < 100)")
    print(f"{'ledger + budgets add':<28} {with_budgets:8.1f} us (goal < 100)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=10)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.calls, arguments.rounds))
