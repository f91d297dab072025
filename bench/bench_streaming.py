"""Streaming replies, measured: how soon a person sees the first words, how many edits a reply
costs within a platform's rate, and what streaming costs the pipeline.

    python bench/bench_streaming.py              # the three figures
    python bench/bench_streaming.py --quick      # fewer replies and turns
    python bench/bench_streaming.py --litellm-ceiling   # only: what litellm's pricing costs

1. First token to first visible text: a scripted model writes a token (4 characters) every
   ``--token-ms``; the time from its first token to the first call that shows text in the
   chat (an in-process channel, real time), median and worst of ``--replies`` replies. The
   first preview waits 0.1 s after the first text: 100 ms of the figure is that wait.
2. Edits per reply under the rate limit: a reply of ``--reply-chars`` written at that pace,
   into a chat whose platform allows a call a second and an edit of one message a second
   (and answers a call sooner with a 429): the preview calls made, and the 429s met.
3. The pipeline with streaming on against off: turns per second of ``bench_pipeline``'s
   pipeline (zero-latency model), rounds of on and off interleaved so both see the same
   machine; the ratio on / off; the same with a model that takes ``--model-ms`` and one that
   takes ``--real-model-ms`` (a hosted model's time to answer, at its quickest); and what a
   streamed model call costs against one in one piece, through the client alone (litellm's
   stream wrapper), with the parts of it litellm spends most on.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pipeline import pipeline

from clawbot.app import Clawbot, default_tools
from clawbot.channels.interface import ChannelLimits
from clawbot.channels.pacer import LoopClock
from clawbot.messages import OutboundEdit, OutboundMessage
from clawbot.providers import litellm_module
from clawbot.runtime.litellm_stream import lean_stream_ends
from clawbot.runtime.llm import ModelClient
from clawbot.runtime.text_stream import streaming_to
from clawbot.settings import Settings
from clawbot.testing import ChatRules, MemoryChannel, ScriptedModel, ScriptedUsage, StreamPace

RATE = ChannelLimits(max_message_chars=4096, message_interval=1.0, edit_interval=1.0)
"""A platform's per-chat rate as Telegram and Slack document it: about a call a second."""


class TokenPace(StreamPace):
    """A model that writes a token every ``seconds``; notes when the first one came."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.first: float | None = None
        self.release()

    async def next_chunk(self) -> None:
        await asyncio.sleep(self.seconds)
        if self.first is None:
            self.first = time.perf_counter()
        await super().next_chunk()


class WatchedChat(MemoryChannel):
    """A live chat that notes when it first showed text, and counts the calls to it."""

    def __init__(self, rules: ChatRules) -> None:
        super().__init__("bench", live=True, limits=RATE, rules=rules)
        self.first_shown: float | None = None
        self.calls = 0

    async def send(self, message: OutboundMessage) -> list:  # type: ignore[type-arg]
        self._shown()
        return await super().send(message)

    async def edit(self, edit: OutboundEdit) -> None:
        self._shown()
        await super().edit(edit)

    def _shown(self) -> None:
        self.calls += 1
        if self.first_shown is None:
            self.first_shown = time.perf_counter()


async def one_reply(home: Path, text: str, token_seconds: float) -> tuple[float, int, int]:
    """Seconds from the first token to the first visible text, the preview calls (a first
    message and its edits) and the 429s of one streamed reply."""
    pace = TokenPace(token_seconds)
    model = ScriptedModel(name="streaming", chunk_size=4, pace=pace, record=False)
    model.add(text)
    settings = Settings(home=home, model=model.model_string, _env_file=None)  # type: ignore[call-arg]
    clock = LoopClock()
    rules = ChatRules(clock, RATE.message_interval, RATE.edit_interval)
    with model.installed():
        async with await Clawbot.open(settings) as bot:
            chat = WatchedChat(rules)
            bot.connect(chat)
            await bot.router.handle(chat.message("write"))
    assert chat.chat() == [text], "the reply must end as written"
    assert pace.first is not None and chat.first_shown is not None
    # the last call is the reply's final edit (or its message), not a preview
    return chat.first_shown - pace.first, chat.calls - 1, rules.refused


def prose(chars: int) -> str:
    words = [
        "streaming",
        "replies",
        "show",
        "the",
        "first",
        "words",
        "while",
        "the",
        "model",
        "still",
        "writes",
        "the",
        "rest",
    ]
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < chars:
        out.append(words[len(out) % len(words)])
    return " ".join(out)[:chars].rstrip() + "."


async def model_call_ms(streamed: bool, calls: int) -> float:
    """Milliseconds of one model call through the client, streamed or not: what litellm's
    stream wrapper costs a call (the request as a turn makes it, with the built-in tools)."""
    model = ScriptedModel(
        name="calls", default_text="Fine, thanks.", record=False, usage=ScriptedUsage(100, 4)
    )
    tools = [tool.spec() for tool in default_tools()]
    messages = [
        {"role": "system", "content": "You are a helpful assistant in a chat. " * 40},
        {"role": "user", "content": "hello"},
    ]
    client = ModelClient()
    sink = _Sink()
    with model.installed():
        for _ in range(20):  # warm
            await client.complete(model.model_string, messages, tools)
        started = time.perf_counter()
        for _ in range(calls):
            if streamed:
                with streaming_to(sink):
                    await client.complete(model.model_string, messages, tools)
            else:
                await client.complete(model.model_string, messages, tools)
    return (time.perf_counter() - started) / calls * 1000


async def stream_parts_ms(calls: int) -> tuple[float, dict[str, float]]:
    """:func:`model_call_ms` streamed, and the milliseconds a call spends in the parts of
    litellm's stream path that cost most, timed by wrapping them (they still run)."""
    litellm = litellm_module()
    from litellm.litellm_core_utils import streaming_handler
    from litellm.types.utils import ModelResponse

    spent: dict[str, float] = {}
    restore: list[tuple[object, str, object]] = []

    def timed(owner: object, name: str, part: str) -> None:
        original = getattr(owner, name)

        def wrapper(*args: object, **kwargs: object) -> object:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent[part] = spent.get(part, 0.0) + time.perf_counter() - started

        restore.append((owner, name, original))
        setattr(owner, name, wrapper)

    timed(litellm, "stream_chunk_builder", "stream_chunk_builder, the response built once")
    timed(ModelResponse, "model_copy", "copies of it (for litellm's cache, with none set)")
    timed(streaming_handler.CustomStreamWrapper, "chunk_creator", "each chunk made a response")
    try:
        await model_call_ms(True, 20)
        spent.clear()
        ms = await model_call_ms(True, calls)
    finally:
        for owner, name, original in reversed(restore):
            setattr(owner, name, original)
    return ms, {part: seconds / (calls + 20) * 1000 for part, seconds in spent.items()}


@contextlib.contextmanager
def litellm_unpriced() -> Iterator[None]:
    """Inside the block (the benchmark's process only, never clawbot's), a streamed call as
    if litellm priced nothing and built nothing at a stream's end: the stream wrapper is not
    priced when made, and the usage chunk is the provider's usage as sent (no cost). What
    the zero-latency ratio would be without them: a ceiling, not a way to run."""
    litellm: Any = litellm_module()
    litellm_utils: Any = importlib.import_module("litellm.utils")
    from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper

    metadata, builder = litellm_utils.update_response_metadata, litellm.stream_chunk_builder

    def unpriced_wrapper(result: object, *args: Any, **kwargs: Any) -> None:
        if not isinstance(result, CustomStreamWrapper):
            metadata(result, *args, **kwargs)

    def as_sent(chunks: list[Any], **kwargs: Any) -> Any:
        usage = next((c.usage for c in reversed(chunks) if getattr(c, "usage", None)), None)
        return SimpleNamespace(usage=usage) if usage is not None else builder(chunks, **kwargs)

    litellm_utils.update_response_metadata = unpriced_wrapper
    litellm.stream_chunk_builder = as_sent
    try:
        yield
    finally:
        litellm_utils.update_response_metadata, litellm.stream_chunk_builder = metadata, builder


async def ceiling(rounds: int, sessions: int, turns: int) -> tuple[float, float]:
    """The zero-latency ratio on / off as it is and with :func:`litellm_unpriced`, the
    medians of ``rounds`` rounds of off, on and on unpriced, interleaved."""
    model = ScriptedModel(
        name="bench",
        default_text="Fine, thanks.",
        record=False,
        usage=ScriptedUsage(prompt_tokens=100, completion_tokens=4),
    )
    rates: dict[str, list[float]] = {"off": [], "on": [], "unpriced": []}
    with model.installed():
        lean_stream_ends(litellm_module())
        for _ in range(rounds):
            for kind, kept in rates.items():
                within = litellm_unpriced() if kind == "unpriced" else contextlib.nullcontext()
                with within, tempfile.TemporaryDirectory() as home:
                    run = await pipeline(
                        Path(home), model, sessions, turns, 60, streaming=kind != "off"
                    )
                kept.append(run.rate)
    on = [a / b for a, b in zip(rates["on"], rates["off"], strict=True)]
    unpriced = [a / b for a, b in zip(rates["unpriced"], rates["off"], strict=True)]
    return statistics.median(on), statistics.median(unpriced)


class _Sink:
    def on_text(self, text: str) -> None:
        pass

    def on_call_end(self, tool_calls: bool) -> None:
        pass


async def ratio_on_off(
    rounds: int, sessions: int, turns: int, model_seconds: float = 0.0
) -> tuple[float, float, list[float]]:
    """The pipeline's turns a second with streaming on and off (the same channel, one that
    can show a reply while it is written), median over ``rounds`` interleaved rounds."""
    # Usage reported, as providers do: without it litellm counts a streamed call's tokens
    # (tiktoken over the whole request), which no real provider makes it do.
    model = ScriptedModel(
        name="bench",
        default_text="Fine, thanks.",
        record=False,
        usage=ScriptedUsage(prompt_tokens=100, completion_tokens=4),
        delay=model_seconds,
    )
    on_rates: list[float] = []
    off_rates: list[float] = []
    with model.installed():
        litellm_module()
        for _ in range(rounds):
            for streaming, rates in ((True, on_rates), (False, off_rates)):
                with tempfile.TemporaryDirectory() as home:
                    run = await pipeline(
                        Path(home), model, sessions, turns, 60, streaming=streaming
                    )
                rates.append(run.rate)
    per_round = [on / off for on, off in zip(on_rates, off_rates, strict=True)]
    return statistics.median(on_rates), statistics.median(off_rates), per_round


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=10)
    parser.add_argument("--token-ms", type=float, default=20.0)
    parser.add_argument("--reply-chars", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--model-ms", type=float, default=20.0)
    parser.add_argument("--real-model-ms", type=float, default=250.0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--litellm-ceiling", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.replies, args.rounds, args.sessions = 3, 2, 50
    if args.litellm_ceiling:
        as_is, unpriced = await ceiling(args.rounds, args.sessions, args.turns)
        print(
            f"zero-latency ratio on / off: {as_is:.2f} as it is, {unpriced:.2f} with litellm's"
            " stream wrapper unpriced and no build at a stream's end (a ceiling)"
        )
        return

    firsts: list[float] = []
    previews: list[int] = []
    refused = 0
    for _ in range(args.replies):
        with tempfile.TemporaryDirectory() as home:
            first, calls, refusals = await one_reply(
                Path(home), prose(args.reply_chars), args.token_ms / 1000
            )
        firsts.append(first)
        previews.append(calls)
        refused += refusals
    written = args.reply_chars / 4 * args.token_ms / 1000
    on, off, per_round = await ratio_on_off(args.rounds, args.sessions, args.turns)
    slow_on, slow_off, slow_rounds = await ratio_on_off(
        args.rounds, max(10, args.sessions // 5), args.turns, args.model_ms / 1000
    )
    real_on, real_off, real_rounds = await ratio_on_off(
        max(2, args.rounds // 2), 5, args.turns, args.real_model_ms / 1000
    )
    call_off = await model_call_ms(False, args.calls)
    call_on = await model_call_ms(True, args.calls)
    _, parts = await stream_parts_ms(args.calls)

    print(f"streaming (Python {sys.version.split()[0]}, {os.cpu_count()} cores)")
    print(
        f"  first token to first visible text  {statistics.median(firsts) * 1000:7.1f} ms median,"
        f" {max(firsts) * 1000:.1f} ms worst of {args.replies}  (goal < 300 ms)"
    )
    print(
        f"  preview calls per reply            {statistics.median(previews):7.1f}"
        f"    ({args.reply_chars} characters written in {written:.1f} s; a call a second"
        f" allowed; 429s met: {refused})"
    )
    print(f"  pipeline, streaming on             {on:7.0f} turns/s")
    print(f"  pipeline, streaming off            {off:7.0f} turns/s")
    print(
        f"  ratio on / off                     {on / off:7.2f}    (goal >= 0.90; round by"
        f" round {min(per_round):.2f} to {max(per_round):.2f})"
    )
    print(
        f"  the same with a {args.model_ms:.0f} ms model      {slow_on / slow_off:7.2f}"
        f"    ({slow_on:.0f} / {slow_off:.0f} turns/s; round by round"
        f" {min(slow_rounds):.2f} to {max(slow_rounds):.2f})"
    )
    print(
        f"  the same with a {args.real_model_ms:.0f} ms model     {real_on / real_off:7.2f}"
        f"    ({real_on:.1f} / {real_off:.1f} turns/s; round by round"
        f" {min(real_rounds):.2f} to {max(real_rounds):.2f})"
    )
    print(
        f"  a model call, streamed / not       {call_on:7.2f} / {call_off:.2f} ms"
        f"  (litellm's stream wrapper alone: {call_on - call_off:+.2f} ms a call)"
    )
    for part, ms in parts.items():
        print(f"    {part:48} {ms:5.2f} ms a streamed call")


if __name__ == "__main__":
    asyncio.run(main())
