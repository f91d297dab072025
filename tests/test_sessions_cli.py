"""`clawbot sessions tree`: the sessions and their subagents, from the shell."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from clawbot.cli.main import app
from clawbot.messages import INTERNAL_CHANNEL, TextBlock, TranscriptEntry
from clawbot.routing.sessions import Session, child_key
from clawbot.scheduling.jobs import TurnJob
from clawbot.store import SqliteStore, new_id

runner = CliRunner()


@pytest.fixture(autouse=True)
def forget_cli_log_handlers() -> Iterator[None]:
    """The CLI logs to the stderr it was given; CliRunner's capture is gone after a test."""
    yield
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_clawbot", False):
            root.removeHandler(handler)


async def _family(home: Path) -> None:
    """Two chats with subagents (one with a grandchild) and one chat without any."""
    store = await SqliteStore.open(home / "clawbot.db")
    try:
        for chat in ("chat1", "chat2", "lonely"):
            await store.sessions.create(
                Session(key=f"memory:{chat}", channel="memory", chat_id=chat, agent_id="main")
            )
        r1 = await _spawn(store, "memory:chat1", "r1", "researcher", label="find papers")
        await _spawn(store, r1.key, "w1", "writer")
        await _spawn(store, "memory:chat2", "c1", "coder")
        job = TurnJob(id=new_id("turn"), session_key=r1.key, status="running", attempts=1)
        await store.jobs.submit(r1, job, entry=_task("find papers", job.id))
        await store.jobs.finish(r1, job.id, [], status="done")
    finally:
        await store.close()


async def _spawn(
    store: SqliteStore, owner_key: str, child_id: str, agent_id: str, **meta: object
) -> Session:
    key = child_key(owner_key, child_id)
    return await store.sessions.create(
        Session(
            key=key,
            channel=INTERNAL_CHANNEL,
            chat_id=key,
            agent_id=agent_id,
            deliver=False,
            owner_key=owner_key,
            meta=dict(meta),
        )
    )


def _task(text: str, turn_id: str) -> TranscriptEntry:
    return TranscriptEntry(role="user", content=(TextBlock(text=text),), turn_id=turn_id)


def test_the_tree_shows_every_session_with_subagents_and_what_is_below_it(
    tmp_path: Path,
) -> None:
    asyncio.run(_family(tmp_path))

    result = runner.invoke(app, ["sessions", "tree", "--home", str(tmp_path)])

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "memory:chat1  main · idle"
    assert re.fullmatch(
        r"  └ r1  researcher · done · 1 turn\(s\), first \d+s ago · 'find papers'", lines[1]
    )
    assert lines[2:] == [
        "    └ w1  writer · idle",
        "",
        "memory:chat2  main · idle",
        "  └ c1  coder · idle",
    ]


def test_the_tree_of_a_key_shows_only_that_sessions_subtree(tmp_path: Path) -> None:
    asyncio.run(_family(tmp_path))
    key = child_key("memory:chat1", "r1")

    result = runner.invoke(app, ["sessions", "tree", key, "--home", str(tmp_path)])

    assert result.exit_code == 0, result.output
    assert [line.strip().split("  ")[0] for line in result.stdout.splitlines()] == [
        key,
        "└ w1",
    ]


def test_the_tree_of_an_unknown_key_fails_with_one_clear_line(tmp_path: Path) -> None:
    asyncio.run(_family(tmp_path))

    result = runner.invoke(app, ["sessions", "tree", "memory:nope", "--home", str(tmp_path)])

    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "clawbot: no session has the key 'memory:nope' (`clawbot sessions tree` lists the trees)"
    ]


def test_the_tree_without_any_subagents_says_so(tmp_path: Path) -> None:
    result = runner.invoke(app, ["sessions", "tree", "--home", str(tmp_path)])

    assert result.exit_code == 0
    assert result.stdout == "No session has subagents.\n"


async def _priced_child(home: Path) -> None:
    """A chat whose subagent had two model calls, one priced and one not."""
    store = await SqliteStore.open(home / "clawbot.db")
    try:
        await store.sessions.create(
            Session(key="memory:chat1", channel="memory", chat_id="chat1", agent_id="main")
        )
        r1 = await _spawn(store, "memory:chat1", "r1", "researcher")
        job = TurnJob(id=new_id("turn"), session_key=r1.key, status="running", attempts=1)
        await store.jobs.submit(r1, job, entry=_task("find papers", job.id))
        calls: list[dict[str, Any]] = [
            {"usage": {"prompt_tokens": 1000, "completion_tokens": 200}, "cost_usd": 0.004},
            {"usage": {"prompt_tokens": 1100, "completion_tokens": 34}},
        ]
        answers = [
            TranscriptEntry(role="assistant", content=(TextBlock(text="..."),), meta=meta)
            for meta in calls
        ]
        await store.jobs.finish(r1, job.id, answers, status="done")
    finally:
        await store.close()


def test_the_tree_shows_the_tokens_and_cost_a_subagents_model_calls_used(
    tmp_path: Path,
) -> None:
    asyncio.run(_priced_child(tmp_path))

    result = runner.invoke(app, ["sessions", "tree", "--home", str(tmp_path)])

    assert result.exit_code == 0, result.output
    assert re.fullmatch(
        r"  └ r1  researcher · done · 1 turn\(s\), first \d+s ago · 2,334 tokens · \$0\.0040",
        result.stdout.splitlines()[1],
    )
