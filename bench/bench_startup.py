"""Time from start to the first possible reply, and what of it is litellm's.

    python bench/bench_startup.py              # 5 runs of each
    python bench/bench_startup.py --runs 3

Each run starts a fresh process on a home that already exists (a restart, not a first run):
- ``import litellm``: the import alone, in a bare interpreter (litellm's share);
- ``clawbot chat``: from spawning ``clawbot chat`` with one piped line to its reply on stdout;
- ``clawbot run`` (Telegram): a DM waits at the Telegram stand-in before the bot starts; from
  spawning ``clawbot run`` to the stand-in receiving the reply's ``sendMessage``, and to the
  log line saying the bot is connected.
The model is the OpenAI-compatible stand-in (the real litellm HTTP path), the platform the
project's Telegram stand-in, both on 127.0.0.1. Medians are printed with the spread.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.standins.openai_api import OpenAIStandin
from tests.standins.telegram import TelegramHarness

CLAWBOT = [sys.executable, "-m", "clawbot"]


def environment(home: Path, model: OpenAIStandin, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAWBOT_", "OPENAI_"))}
    env.update(
        CLAWBOT_HOME=str(home),
        OPENAI_API_BASE=model.base_url,
        OPENAI_API_KEY="sk-bench-not-a-real-key-000000",
        **extra,
    )
    return env


def litellm_import() -> float:
    code = "import time; t = time.perf_counter(); import litellm; print(time.perf_counter() - t)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        check=True,
    )
    return float(done.stdout.decode().strip().splitlines()[-1])


def chat_first_reply(home: Path, model: OpenAIStandin) -> float:
    started = time.perf_counter()
    process = subprocess.Popen(
        [*CLAWBOT, "chat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=environment(home, model),
        cwd=home.parent,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(b"hello\n")
    process.stdin.close()
    line = process.stdout.readline()
    elapsed = time.perf_counter() - started
    process.wait(60)
    assert line.startswith(b"echo: hello"), line
    return elapsed


async def run_first_reply(home: Path, model: OpenAIStandin, run: int) -> tuple[float, float]:
    """Seconds to the 'connected' log line and to the reply reaching the stand-in. Each
    run's DM comes from another person: the stand-in numbers messages from 1 again, and
    the bot's dedup ledger would take a repeated id for a redelivery."""
    harness = TelegramHarness()
    await harness.start()
    try:
        await harness.inject_message("hello", chat_type="dm", sender_id=str(2000 + run))
        env = environment(
            home,
            model,
            CLAWBOT_DM_POLICY="open",
            CLAWBOT_TELEGRAM_TOKEN=harness.token,
            CLAWBOT_TELEGRAM_API_BASE=f"{harness.server.url}/bot",
            CLAWBOT_TELEGRAM_FILE_BASE=f"{harness.server.url}/file/bot",
        )
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(
            *CLAWBOT,
            "run",
            env=env,
            cwd=home.parent,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        assert process.stderr is not None
        connected = 0.0
        reader = process.stderr

        async def watch_log() -> None:
            nonlocal connected
            async for raw in reader:
                if not connected and b"telegram: connected as" in raw:
                    connected = time.perf_counter() - started

        watcher = asyncio.create_task(watch_log())
        await harness.wait_sent(1, timeout=120)
        replied = time.perf_counter() - started
        process.terminate()
        await process.wait()
        await watcher
        return connected, replied
    finally:
        await harness.stop()


def summary(label: str, values: list[float]) -> str:
    ordered = sorted(values)
    return (
        f"{label:<34} median {statistics.median(ordered):5.2f} s"
        f"   (min {ordered[0]:.2f}, max {ordered[-1]:.2f}, {len(ordered)} runs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    model = OpenAIStandin()
    imports, chats, connects, replies = [], [], [], []
    with model.running(), tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        chat_first_reply(home, model)  # seeds the home: the runs below are restarts
        for run in range(args.runs):
            imports.append(litellm_import())
            chats.append(chat_first_reply(home, model))
            connected, replied = asyncio.run(run_first_reply(home, model, run))
            connects.append(connected)
            replies.append(replied)
    print(summary("import litellm (bare interpreter)", imports))
    print(summary("clawbot chat: start -> first reply", chats))
    print(summary("clawbot run: start -> connected", connects))
    print(summary("clawbot run: start -> first reply", replies))


if __name__ == "__main__":
    main()
