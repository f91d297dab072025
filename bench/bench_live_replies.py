"""Streamed replies on the Telegram and Slack stand-ins, through the real adapters and the
whole pipeline (the setup of tests/test_streaming_platforms.py: tests/live_chats.py).

    python bench/bench_live_replies.py                     # about two minutes
    python bench/bench_live_replies.py --replies 5 --chars 4000 --chars-per-second 1000

1. First visible text: a scripted model writes a token (4 characters) every ``--token-ms``
   through the real litellm streaming path; the time from its first token to the moment the
   stand-in receives the call that shows text (Telegram's sendMessageDraft in a private chat,
   sendMessage in a group; Slack's chat.postMessage). The first preview waits 0.1 s after
   the first text (a reply done by then is sent whole), so 100 ms of the figure is that wait;
   the model's time to finish the first word falls within it. Real time; each reply in a
   chat of its own, so no pacing interval from an earlier reply is in it. Goal: under 300 ms.
   (bench/bench_streaming.py measures the same on an in-process channel, and the pipeline
   with streaming on against off.)
2. Calls per reply: a reply of ``--chars`` characters (10,000) written at
   ``--chars-per-second`` (400, about 100 tokens a second), in real time on each platform's
   documented rates: the previews sent (edits, or drafts), the messages, the calls the
   platform refused and those that came before a wait it asked for was over.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clawbot.testing import ScriptedModel, StreamPace
from tests.live_chats import CHUNK, Platform, long_reply, serving
from tests.standins.rate_rules import ChatActivity

GOAL_MS = 300.0
SHOWING = {"sendMessageDraft", "sendMessage", "chat.postMessage"}
"""The calls that put a reply's first text in front of the person."""


class TokenPace(StreamPace):
    """A model that writes a token every ``seconds``; notes when the first one came."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.release()
        self.at: float | None = None

    async def next_chunk(self) -> None:
        await asyncio.sleep(self.seconds)
        if self.at is None:
            self.at = time.perf_counter()
        await super().next_chunk()


async def first_visible(
    platform: Platform,
    chat_type: Literal["dm", "group"],
    replies: int,
    token_seconds: float,
    home: Path,
) -> list[float]:
    """Milliseconds from the model's first token to the call that shows text, per reply."""
    model = ScriptedModel(name=f"bench-{platform}-{chat_type}", chunk_size=4, record=False)
    model.default_text = long_reply(200)  # the same first word (two tokens) in every reply
    seen: dict[str, float] = {}
    chats = [str(3000 + n) for n in range(replies)]
    if platform == "telegram" and chat_type == "group":
        chats = [str(-1002000000000 - n) for n in range(replies)]
    elif platform == "slack":
        chats = [f"D{3000 + n}" if chat_type == "dm" else f"C0BENCH{n}" for n in range(replies)]
    groups = [f"{platform}:{chat}" for chat in chats] if chat_type == "group" else []

    def noted(method: str, params: dict[str, Any]) -> None:
        chat = str(params.get("chat_id") or params.get("channel") or "")
        if method in SHOWING and chat not in seen:
            seen[chat] = time.perf_counter()

    latencies: list[float] = []
    with model.installed():
        async with serving(
            platform,
            home,
            model,
            chat_type=chat_type,
            virtual=False,
            dm_policy="open",
            allowed_groups=groups,
        ) as live:
            live.standin.observe(noted)
            for n, chat in enumerate(chats):
                pace = model.pace = TokenPace(token_seconds)
                fields: dict[str, Any] = {"sender_id": str(3000 + n)}
                if chat_type == "group":
                    fields["chat_id"] = chat
                await live.say(f"question {n}", **fields)
                await answered(live.book.activity(chat))
                await asyncio.wait_for(live.service.idle(), 60)
                assert pace.at is not None and chat in seen, f"no reply shown in {chat}"
                latencies.append((seen[chat] - pace.at) * 1000)
    return latencies


async def answered(activity: ChatActivity, timeout: float = 60.0) -> None:
    """Until the chat got the reply's message (the stand-in counts it)."""
    deadline = time.monotonic() + timeout
    while not activity.messages:
        if time.monotonic() > deadline:
            raise TimeoutError("no reply reached the chat")
        await asyncio.sleep(0.002)


async def calls_per_reply(
    platform: Platform,
    chat_type: Literal["dm", "group"],
    chars: int,
    chars_per_second: float,
    home: Path,
) -> str:
    """One reply written at ``chars_per_second``: what reached the chat, and how."""
    reply = long_reply(chars)
    model = ScriptedModel(name=f"bench-calls-{platform}", chunk_size=CHUNK, record=False)
    model.add(reply)
    model.pace = pace = StreamPace()
    loop = asyncio.get_running_loop()
    with model.installed():
        async with serving(platform, home, model, chat_type=chat_type, virtual=False) as live:
            await live.say("tell me everything")
            start = loop.time()
            for written in range(1, -(-len(reply) // CHUNK)):  # a chunk at its time
                await asyncio.wait_for(pace.held(), 60)
                await asyncio.sleep(
                    max(0.0, start + written * CHUNK / chars_per_second - loop.time())
                )
                pace.allow(1)
            pace.release()
            await answered(live.activity())
            await asyncio.wait_for(live.service.idle(), 120)
            activity = live.activity()
            exact = live.shows() == live.parts(reply)
    previews = f"{activity.drafts} drafts" if activity.drafts else f"{activity.edits} edits"
    return (
        f"{previews} + {activity.messages} messages, {activity.refused} refused, "
        f"{activity.unhonoured} sent before a wait was over; chat shows the reply exactly: {exact}"
    )


def summary(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    verdict = "met" if p95 < GOAL_MS else "MISSED"
    return (
        f"median {statistics.median(ordered):6.1f} ms  p95 {p95:6.1f} ms  "
        f"max {ordered[-1]:6.1f} ms   goal p95 < {GOAL_MS:.0f} ms: {verdict}"
    )


async def main(replies: int, token_ms: float, chars: int, chars_per_second: float) -> None:
    kinds: list[tuple[Platform, Literal["dm", "group"], str]] = [
        ("telegram", "dm", "telegram private chat (draft)"),
        ("telegram", "group", "telegram group (message)"),
        ("slack", "dm", "slack direct message (message)"),
        ("slack", "group", "slack channel (message)"),
    ]
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        print(
            f"first visible text after the model's first token ({replies} replies each, "
            f"a token every {token_ms:g} ms):"
        )
        for n, (platform, chat_type, label) in enumerate(kinds):
            home = root / f"first{n}"
            latencies = await first_visible(platform, chat_type, replies, token_ms / 1000, home)
            print(f"  {label:32} {summary(latencies)}")
        print(
            f"a reply of {chars:,} characters written at {chars_per_second:g} characters/s "
            f"({chars / chars_per_second:.0f} s), documented rates, real time:"
        )
        for n, (platform, chat_type, label) in enumerate(kinds):
            home = root / f"calls{n}"
            line = await calls_per_reply(platform, chat_type, chars, chars_per_second, home)
            print(f"  {label:32} {line}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=20)
    parser.add_argument("--token-ms", type=float, default=20.0)
    parser.add_argument("--chars", type=int, default=10_000)
    parser.add_argument("--chars-per-second", type=float, default=400.0)
    args = parser.parse_args()
    asyncio.run(main(args.replies, args.token_ms, args.chars, args.chars_per_second))
