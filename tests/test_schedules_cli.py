"""``clawbot schedule`` from the shell, and a scheduled run in a real process killed with
SIGKILL mid-turn: after the restart it is resumed, and never started a second time."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clawbot.cli.main import app
from clawbot.routing.sessions import Session
from clawbot.schedules.records import ScheduledTask
from clawbot.store import SqliteStore

from .standins.openai_api import OpenAIStandin
from .test_cli import chat_killed_when_the_model_hangs, environment, run
from .test_sessions_cli import forget_cli_log_handlers

runner = CliRunner()
__all__ = ["forget_cli_log_handlers"]


@pytest.fixture(autouse=True)
def _logs(forget_cli_log_handlers: Iterator[None]) -> None:
    return None


async def _chat(home: Path, key: str = "memory:chat1") -> None:
    store = await SqliteStore.open(home / "clawbot.db")
    try:
        chat = key.split(":", 1)[1]
        await store.sessions.create(
            Session(key=key, channel="memory", chat_id=chat, agent_id="main")
        )
    finally:
        await store.close()


def test_the_shell_adds_lists_and_cancels_a_sessions_tasks(tmp_path: Path) -> None:
    asyncio.run(_chat(tmp_path))
    added = runner.invoke(
        app,
        ["schedule", "add", "memory:chat1", "every 2 hours", "the news", "--home", str(tmp_path)],
    )
    assert added.exit_code == 0, added.output
    assert "every 2 hours" in added.stdout and "the news" in added.stdout
    task_id = added.stdout.split()[1].rstrip(":")

    listed = runner.invoke(app, ["schedule", "list", "--home", str(tmp_path)])
    assert listed.stdout.startswith(f"memory:chat1  {task_id}: every 2 hours")

    cancelled = runner.invoke(app, ["schedule", "cancel", task_id, "--home", str(tmp_path)])
    assert cancelled.exit_code == 0, cancelled.output
    assert runner.invoke(app, ["schedule", "list", "--home", str(tmp_path)]).stdout == (
        "No scheduled tasks.\n"
    )


def test_the_shell_refuses_a_bad_time_with_one_clear_line(tmp_path: Path) -> None:
    asyncio.run(_chat(tmp_path))
    result = runner.invoke(
        app, ["schedule", "add", "memory:chat1", "cron 0 25 * * *", "x", "--home", str(tmp_path)]
    )
    assert result.exit_code == 1
    assert "is not a valid cron expression" in result.stderr
    assert "Traceback" not in result.output


def test_the_shell_names_an_unknown_session(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["schedule", "add", "memory:nope", "in 1 hour", "x", "--home", str(tmp_path)]
    )
    assert result.exit_code == 1
    assert "no session has the key 'memory:nope'" in result.stderr


async def _due_task(home: Path, key: str) -> str:
    """A one-off task of ``key`` that came due a minute ago (clawbot was not running)."""
    store = await SqliteStore.open(home / "clawbot.db")
    try:
        due = datetime.now(UTC) - timedelta(minutes=1)
        task = ScheduledTask(
            id="sch_report",
            session_key=key,
            agent_id="main",
            kind="once",
            spec=due.isoformat(),
            tz="UTC",
            prompt="write the weekly report",
            status="active",
            next_run=due,
        )
        assert await store.schedules.create(task, cap=10)
        return task.id
    finally:
        await store.close()


def test_a_scheduled_run_killed_mid_turn_is_resumed_once_and_never_started_again(
    standin: OpenAIStandin, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    env = environment(home, standin)
    standin.script = ["Hello.", {"hang": True}, "The weekly report."]
    assert run(["chat"], b"hi\n", env, tmp_path).returncode == 0  # the terminal's session
    asyncio.run(_due_task(home, "console:local"))

    # The run starts at once (it came due while clawbot was down); the process is killed
    # while the model works on it.
    chat_killed_when_the_model_hangs(standin, env, tmp_path, b"", "the scheduled run")
    restarted = run(["chat"], b"", env, tmp_path)

    assert restarted.returncode == 0, restarted.stderr.decode()
    assert restarted.stdout.decode().count("The weekly report.") == 1
    with sqlite3.connect(home / "clawbot.db") as db:
        jobs = db.execute(
            "SELECT status FROM turn_jobs WHERE session_key = 'console:local' AND lane = 'cron'"
        ).fetchall()
        (status,) = db.execute(
            "SELECT status FROM scheduled_tasks WHERE id = 'sch_report'"
        ).fetchone()
    assert jobs == [("done",)]
    assert status == "done"
    prompts = [
        m["content"]
        for m in standin.requests[-1]["messages"]
        if m["role"] == "user" and "weekly report" in str(m["content"])
    ]
    assert len(prompts) == 1
