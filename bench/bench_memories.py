"""The memory store at 100,000 memories: insert rate, FTS recall latency (p50/p99), database
size, and what a ``[Context: memory]`` recall adds to a turn.

    python bench/bench_memories.py                     # 100,000 memories
    python bench/bench_memories.py --memories 10000    # a quicker look
    python bench/bench_memories.py --embeddings local  # semantic recall: hybrid ranking

Memories are written one by one through ``store.memories.put`` (what ``memory_store``
does: a commit each, group commit when they overlap), by 20 agents in 2,000 sessions. Their
texts are 8 to 40 words drawn from a Zipf-like vocabulary of 20,000 words plus common
English ones, so some words are in half the memories and most in a handful. Recall queries
are chat messages of the same words (6 to 14, common ones included), searched as a turn's
recall searches: the agent's namespace plus two it recalls from, five results. The turn
cost is the median time of a turn answered at once (no litellm) with recall on, minus the
same with recall off. The goal: FTS recall p99 under 10 ms at 100,000 memories.

With ``--embeddings local`` (or a litellm model) every memory is embedded as it is written,
and the searches are hybrid (bm25 blended with vector similarity); it also prints how long
a fresh process takes to load the vectors at its first search. The synthetic words mean
nothing to the model, so this measures cost, not quality (tests/test_memory_semantic.py
checks quality).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clawbot.agents.profiles import ContextPolicy
from clawbot.app import Clawbot
from clawbot.memory.embeddings import embedder_for
from clawbot.memory.recall import MEMORY_BLOCK, memory_context
from clawbot.memory.records import MemoryQuery
from clawbot.runtime.llm import ModelClient
from clawbot.runtime.replies import ModelReply
from clawbot.settings import Settings
from clawbot.store import SqliteStore
from clawbot.testing import MemoryChannel

GOAL_P99_MS = 10.0
AGENTS = [f"agent{n}" for n in range(20)]
COMMON_WORDS = (
    "the a to and of i you it is in that my for on have be with this what was do we can "
    "your not me are at so but about just like will if there how get all one when"
)
COMMON = COMMON_WORDS.split()


class DirectModel(ModelClient):
    """Answers every request at once, without litellm, and notes whether it saw recall."""

    def __init__(self) -> None:
        super().__init__()
        self.recalled = 0

    async def complete(
        self, model: str, messages: object, *args: object, **kw: object
    ) -> ModelReply:
        if MEMORY_BLOCK in str(messages):
            self.recalled += 1
        return ModelReply(text="ok", tool_calls=(), usage={})


class Words:
    """A Zipf-like vocabulary: word i is drawn with weight 1 / (i + 1)."""

    def __init__(self, rng: random.Random, size: int = 20_000) -> None:
        self.rng = rng
        self.vocabulary = [f"w{n:05d}" for n in range(size)]
        self.cumulative = list(itertools.accumulate(1 / (n + 1) for n in range(size)))

    def text(self, low: int, high: int, common: float) -> str:
        count = self.rng.randint(low, high)
        words = self.rng.choices(self.vocabulary, cum_weights=self.cumulative, k=count)
        return " ".join(self.rng.choice(COMMON) if self.rng.random() < common else w for w in words)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


async def insert(bot: Clawbot, words: Words, count: int) -> float:
    rng = words.rng
    started = time.perf_counter()
    for n in range(count):
        agent = rng.choice(AGENTS)
        await bot.store.memories.put(
            namespace=agent,
            key=f"note-{n}",
            text=words.text(8, 40, 0.3),
            tags=(rng.choice(("prefs", "facts", "people", "plans", "work")),),
            session_key=f"telegram:{rng.randrange(2000)}",
            agent_id=agent,
        )
    return count / (time.perf_counter() - started)


async def recall_latencies(bot: Clawbot, words: Words, queries: int) -> list[float]:
    rng = words.rng
    latencies: list[float] = []
    for _ in range(queries):
        agent = rng.choice(AGENTS)
        query = MemoryQuery(
            text=words.text(6, 14, 0.4),
            session_key=f"telegram:{rng.randrange(2000)}",
            agent_id=agent,
            namespaces=(agent, *rng.sample(AGENTS, 2)),
            limit=5,
        )
        started = time.perf_counter()
        await bot.store.memories.search(query)
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


async def turn_times(bot: Clawbot, words: Words, turns: int) -> tuple[list[float], list[float]]:
    """Turns in two chats, one on ``main`` (no recall) and one on ``recaller`` (recall from
    every namespace), alternately, so a drift of the machine's speed hits both alike."""
    channel = bot.outbox.adapter("memory")
    assert isinstance(channel, MemoryChannel)
    await bot.router.handle(channel.message("/agent recaller", chat_id="on", sender_id="u0"))
    times: dict[str, list[float]] = {"off": [], "on": []}
    for n in range(turns * 2):
        chat = "on" if n % 2 else "off"
        message = channel.message(words.text(6, 14, 0.4), chat_id=chat, sender_id=f"user{n}")
        started = time.perf_counter()
        await bot.router.handle(message)
        times[chat].append((time.perf_counter() - started) * 1000)
        channel.sent.clear()
    return times["off"], times["on"]


async def run(home: Path, count: int, queries: int, turns: int, embeddings: str) -> None:
    words = Words(random.Random(19))
    settings = Settings(home=home, dm_policy="open", memory_embeddings=embeddings, _env_file=None)  # type: ignore[call-arg]
    model = DirectModel()
    kind = "FTS" if embeddings == "off" else "hybrid"
    async with await Clawbot.open(settings, client=model) as bot:
        bot.connect(MemoryChannel())
        rate = await insert(bot, words, count)
        extra = "" if embeddings == "off" else f" (each embedded, {embeddings})"
        print(f"insert: {count:,} memories one by one{extra}, {rate:,.0f} memories/s")
        await recall_latencies(bot, words, 50)  # warm the page cache
        latencies = await recall_latencies(bot, words, queries)
        p50, p99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
        print(
            f"{kind} recall ({queries:,} queries, 5 results, 3 namespaces):"
            f" p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {max(latencies):.2f} ms"
        )
        if embeddings != "off":
            assert isinstance(bot.store, SqliteStore)
            bot.store.memories.use_embeddings(embedder_for(embeddings))  # as a fresh process
            started = time.perf_counter()
            await recall_latencies(bot, words, 1)
            print(
                f"vectors loaded at a fresh process's first search: {time.perf_counter() - started:.2f} s"
            )
        recaller = bot.agents.get("main").model_copy(
            update={
                "agent_id": "recaller",
                "name": "recaller",
                "context": ContextPolicy(memory_recall=True, recall_from=("*",)),
            }
        )
        await bot.agents.create(recaller)
        session = await bot.router.session_for(MemoryChannel().message("x", chat_id="probe"))
        builds = []
        for _ in range(max(1, queries // 4)):
            message = words.text(6, 14, 0.4)
            started = time.perf_counter()
            await memory_context(bot.store.memories, recaller, session, message)
            builds.append((time.perf_counter() - started) * 1000)
        off, on = await turn_times(bot, words, turns)
        assert model.recalled > 0, "recall never reached the model"
        added = statistics.median(on) - statistics.median(off)
        print(
            f"recall block (every namespace): median {statistics.median(builds):.2f} ms;"
            f" turn median {statistics.median(off):.2f} ms without recall,"
            f" {statistics.median(on):.2f} ms with: recall adds {added:.2f} ms a turn"
        )
    size = sum(p.stat().st_size for p in home.glob("clawbot.db*"))
    print(f"database size: {size / 1024 / 1024:.1f} MB ({size / count:,.0f} bytes a memory)")
    print(
        f"goal: FTS recall p99 < {GOAL_P99_MS:g} ms at {count:,} memories:"
        f" {'met' if p99 < GOAL_P99_MS else 'NOT met'}"
        if kind == "FTS"
        else f"hybrid recall at {count:,} memories: p50 {p50:.2f} ms, p99 {p99:.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument(
        "--embeddings", default="off", help="off, local or a litellm embedding model"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        asyncio.run(run(Path(home), args.memories, args.queries, args.turns, args.embeddings))


if __name__ == "__main__":
    main()
