"""The web console's pages, measured: server time of a conversation page of a session
with 10,000 messages, and of a subagent tree with 100 children (goal: under 200 ms each).

    python bench/bench_console.py                      # 10,000 messages, 100 children
    python bench/bench_console.py --messages 500 --children 10 --runs 5

Each page is requested over HTTP from the console served on 127.0.0.1 (uvicorn, as
``clawbot console`` serves it) by a logged-in client; the time is the request's round trip
on the loopback interface, so it holds the server's whole work (store reads, rendering)
and the connection's small share. Prints the median and the worst of ``--runs``.
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

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from clawbot.agents.registry import AgentRegistry
from clawbot.console.auth import COOKIE
from clawbot.console.context import ConsoleContext
from clawbot.console.logtail import LogTail
from clawbot.console.server import ConsoleServer
from clawbot.messages import TextBlock, TranscriptEntry
from clawbot.routing.sessions import Session, child_key
from clawbot.scheduling.jobs import TurnJob
from clawbot.settings import Settings
from clawbot.store import SqliteStore, new_id


async def fill(store: SqliteStore, messages: int, children: int) -> None:
    talk = await store.sessions.create(
        Session(key="memory:long", channel="memory", chat_id="long", agent_id="main")
    )
    for start in range(0, messages, 1000):
        await store.transcripts.append(
            talk,
            [
                TranscriptEntry(
                    role="user" if i % 2 == 0 else "assistant",
                    content=(TextBlock(text=f"message {i}: " + "words " * 30),),
                )
                for i in range(start, min(messages, start + 1000))
            ],
        )
    parent = await store.sessions.create(
        Session(key="memory:boss", channel="memory", chat_id="boss", agent_id="main")
    )
    for n in range(children):
        child = await store.sessions.create(
            Session(
                key=child_key(parent.key, f"c{n}"),
                channel="internal",
                chat_id=f"c{n}",
                agent_id="main",
                owner_key=parent.key,
            )
        )
        job = new_id("turn")
        await store.jobs.submit(
            child,
            TurnJob(id=job, session_key=child.key, status="running", attempts=1),
            entry=TranscriptEntry(role="user", content=(TextBlock(text="task"),), turn_id=job),
        )


async def timed(client: httpx.AsyncClient, path: str, runs: int) -> list[float]:
    await client.get(path)  # warm: templates compiled, pages cached
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        response = await client.get(path)
        times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, response.status_code
    return times


async def main(messages: int, children: int, runs: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(home=Path(folder), _env_file=None)  # type: ignore[call-arg]
        store = await SqliteStore.open(Path(folder) / "clawbot.db")
        try:
            await fill(store, messages, children)
            agents = await AgentRegistry.open(store, None)
            context = ConsoleContext(
                settings=settings, store=store, agents=agents, approvals=None, logs=LogTail()
            )
            server = ConsoleServer(context, host="127.0.0.1", port=0)
            url = await server.start()
            try:
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as c:
                    cookie = (await c.get(url)).cookies[COOKIE]
                    c.headers["cookie"] = f"{COOKIE}={cookie}"
                    pages = {
                        f"conversation page, {messages:,} messages": "/conversation?key=memory:long",
                        f"tree page, {children} children": "/tree?key=memory:boss",
                        "sessions page": "/",
                    }
                    for name, path in pages.items():
                        times = await timed(c, path, runs)
                        print(
                            f"{name}: median {statistics.median(times):.1f} ms, "
                            f"worst {max(times):.1f} ms ({runs} requests)"
                        )
            finally:
                await server.stop()
        finally:
            await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--children", type=int, default=100)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.messages, args.children, args.runs))
