"""What watching the model's window costs a turn: the check before each model call, the exact
token count paid only near the limit, and whole turns with automatic compaction on and off.

    python bench/bench_compaction.py                 # 2,000 turns on each side
    python bench/bench_compaction.py --turns 200     # a quicker look

The turns alternate between two bots on the same machine, one with ``compaction_auto`` off,
each a chat of growing history (its last 60 entries sent) with a zero-latency scripted model.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clawbot.app import Clawbot
from clawbot.runtime.compaction import ContextMeter
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ScriptedModel


def request(messages: int, chars: int) -> list[dict[str, Any]]:
    """A system prompt and ``messages`` chat messages of ``chars`` characters each."""
    said = [
        {"role": "user" if index % 2 == 0 else "assistant", "content": "word " * (chars // 5)}
        for index in range(messages)
    ]
    return [{"role": "system", "content": "You are a helpful assistant. " * 100}, *said]


def tools(count: int) -> tuple[dict[str, Any], ...]:
    return tuple(
        {
            "type": "function",
            "function": {
                "name": f"tool_{index}",
                "description": "does one thing well " * 10,
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
        for index in range(count)
    )


def checks(settings: Settings) -> None:
    meter = ContextMeter(settings)
    offered = tools(25)
    typical = request(60, 100)
    for model in ("gpt-4o-mini", "scripted/bench"):
        meter.over(model, typical, offered)
        runs = 20_000
        took = timeit.timeit(functools.partial(meter.over, model, typical, offered), number=runs)
        print(f"  check, {model:<15} {took / runs * 1e6:8.1f} us a model call (61 messages)")
    near = ContextMeter(settings.model_copy(update={"compaction_threshold": 1.0}))
    for chars in (260_000, 520_000):
        big = request(100, chars // 100)
        near.over("gpt-4o-mini", big, offered)  # tiktoken's first load is not the cost
        started = time.perf_counter()
        near.over("gpt-4o-mini", big, offered)
        took = time.perf_counter() - started
        print(f"  exact count near the limit  {took * 1e3:8.1f} ms for {chars:,} characters")


async def turns(settings: Settings, count: int) -> None:
    model = ScriptedModel(name="bench", record=False)
    times: dict[bool, list[float]] = {True: [], False: []}
    with model.installed(), tempfile.TemporaryDirectory() as folder:
        bots = {}
        for auto in (True, False):
            configured = settings.model_copy(
                update={
                    "home": Path(folder) / str(auto),
                    "model": model.model_string,
                    "compaction_auto": auto,
                    "rate_limit_per_minute": 0,
                }
            )
            bots[auto] = await Clawbot.open(configured)
            bots[auto].connect(MemoryChannel())
        try:
            for index in range(count):
                for auto in (index % 2 == 0, index % 2 != 0):
                    bot = bots[auto]
                    channel = bot.outbox.adapter("memory")
                    assert isinstance(channel, MemoryChannel)
                    started = time.perf_counter()
                    await bot.router.handle(channel.message(f"message {index}: " + "word " * 20))
                    times[auto].append(time.perf_counter() - started)
        finally:
            for bot in bots.values():
                await bot.close()
    on, off = statistics.median(times[True]), statistics.median(times[False])
    print(f"  median turn, auto on        {on * 1e3:8.3f} ms")
    print(f"  median turn, auto off       {off * 1e3:8.3f} ms")
    print(f"  compaction's check adds     {(on - off) * 1e3:8.3f} ms a turn ({count} turns each)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    args = parser.parse_args()
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    print(f"compaction (Python {sys.version.split()[0]}, {os.cpu_count()} cores)")
    checks(settings)
    asyncio.run(turns(settings, args.turns))


if __name__ == "__main__":
    main()
