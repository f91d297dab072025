"""Memory per session: one process answers one message in each of 100,000 sessions, and the
resident memory (RSS) after 10, 10,000 and 100,000 of them shows what a session costs for good.

    python bench/bench_memory.py                              # 10, 10,000, 100,000 sessions
    python bench/bench_memory.py --checkpoints 10 1000 5000   # a quicker look
    python bench/bench_memory.py --litellm                    # the model call through litellm

Every message takes the real path: the access gateway, the router, the scheduler (messages
arrive in bursts, so some wait in their lane), the store, the runtime, a typing indicator,
the outbox. The model answers at once without litellm (whose ~3 ms of CPU per call would make
the run take 5 to 10 minutes and holds no per-session state; ``--litellm`` puts the scripted
model behind it). Each session is a new DM from a new person, so every per-session structure
meets each session once. RSS is read from ``/proc/self/status`` (VmRSS, what the process
holds now, not its peak) after a full garbage collection; the goal is growth from the first
checkpoint to the last under 100 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clawbot.app import Clawbot
from clawbot.channels.interface import SentMessage
from clawbot.messages import OutboundMessage
from clawbot.providers import litellm_module
from clawbot.routing.access import AccessGateway
from clawbot.routing.router import Receipt
from clawbot.runtime.llm import ModelClient
from clawbot.runtime.replies import ModelReply
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ScriptedModel

GOAL_MB = 100.0
REPLY = "Fine, thanks."


class DirectModel(ModelClient):
    """Answers every request at once, without litellm."""

    async def complete(self, *args: object, **kwargs: object) -> ModelReply:
        return ModelReply(text=REPLY, tool_calls=(), usage={})


class CountingChannel(MemoryChannel):
    """Counts what it is sent instead of keeping it (the harness must not grow per session)
    and has a typing indicator, so every turn runs one."""

    def __init__(self) -> None:
        super().__init__()
        self.replies = 0
        self.typed = 0

    async def send(self, message: OutboundMessage) -> list[SentMessage]:
        self.replies += 1
        return [SentMessage(channel=self.name, chat_id=message.chat_id)]

    @property
    def supports_typing(self) -> bool:
        return True

    async def send_typing(self, chat_id: str, thread_id: str | None = None) -> None:
        self.typed += 1


def rss_mb() -> float:
    """What the process holds now (VmRSS), in MB; the peak where /proc is missing."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cached(bot: Clawbot) -> str:
    """How many sessions each per-session structure holds right now (the scheduler's read
    from a private field: it keeps only sessions with work, so this should be 0)."""
    return (
        f"router {len(bot.router.sessions)}, transcripts {len(bot.runtime.transcripts)},"
        f" scheduler queues {len(bot.scheduler._queues)}"
    )


async def run(home: Path, checkpoints: list[int], burst: int, *, litellm: bool) -> None:
    model = ScriptedModel(name="bench-memory", default_text=REPLY, record=False)
    settings = Settings(home=home, model=model.model_string, dm_policy="open", _env_file=None)  # type: ignore[call-arg]
    with model.installed() if litellm else contextlib.nullcontext(model):
        if litellm:
            litellm_module()
        client = None if litellm else DirectModel()
        async with await Clawbot.open(settings, client=client) as bot:
            bot.router.access = AccessGateway(bot.store, settings)
            channel = CountingChannel()
            bot.connect(channel)
            await bot.start()
            done = 0
            first: float | None = None
            previous: tuple[int, float] | None = None
            started = time.perf_counter()
            print(f"{'sessions':>9}  {'RSS':>9}  {'growth':>10}  {'per session':>12}  cached")
            for target in checkpoints:
                while done < target:
                    size = min(burst, target - done)
                    receipts: list[Receipt] = [
                        await bot.router.receive(
                            channel.message(
                                f"hello from person {n}", chat_id=f"chat{n}", sender_id=f"user{n}"
                            )
                        )
                        for n in range(done, done + size)
                    ]
                    for receipt in receipts:
                        outcome = await receipt.wait()
                        assert outcome.kind == "turn", outcome
                    done += size
                await bot.scheduler.wait_idle()
                gc.collect()
                now = rss_mb()
                if first is None:
                    first = now
                step = per = ""
                if previous is not None:
                    step = f"{now - previous[1]:+8.1f} MB"
                    per = f"{(now - previous[1]) * 1024 * 1024 / (done - previous[0]):8.0f} B"
                print(f"{done:9,}  {now:6.1f} MB  {step:>10}  {per:>12}  {cached(bot)}")
                previous = (done, now)
            elapsed = time.perf_counter() - started
            assert channel.replies == done, "every message must be answered"
    assert first is not None and previous is not None
    growth = previous[1] - first
    print(
        f"growth from {checkpoints[0]:,} to {done:,} sessions: {growth:.1f} MB"
        f" (goal < {GOAL_MB:.0f} MB) {'met' if growth < GOAL_MB else 'NOT met'};"
        f" {done:,} turns in {elapsed:.0f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, nargs="+", default=[10, 10_000, 100_000])
    parser.add_argument(
        "--burst", type=int, default=64, help="messages received before their replies are awaited"
    )
    parser.add_argument(
        "--litellm", action="store_true", help="call the scripted model through litellm"
    )
    args = parser.parse_args()
    checkpoints = sorted(args.checkpoints)
    print(f"model call: {'litellm, scripted model' if args.litellm else 'direct, no litellm'}")
    with tempfile.TemporaryDirectory() as home:
        asyncio.run(run(Path(home), checkpoints, args.burst, litellm=args.litellm))


if __name__ == "__main__":
    main()
