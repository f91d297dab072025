"""Audit records: every tool call is written as it starts and completed as it ends, with
its trace, run, step, agent, session, masked arguments, capabilities and outcome; the
shell reads them back as a tail, a trace tree and a JSONL export."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from clawbot.app import Clawbot
from clawbot.cli.main import app
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel, Step, call
from clawbot.tools.registry import ToolRegistry

from .conftest import Chat, parent_key

runner = CliRunner()
OPENAI_KEY = "sk-proj-" + "Q7w8E9r0" * 5


@pytest.fixture(autouse=True)
def forget_cli_log_handlers() -> Iterator[None]:
    """The CLI logs to the stderr it was given; CliRunner's capture is gone after a test."""
    yield
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_clawbot", False):
            root.removeHandler(handler)


async def shell(args: list[str], bot: Clawbot) -> Result:
    """Run a `clawbot` command beside the open bot (its own thread: the CLI runs its own
    event loop)."""
    return await asyncio.to_thread(runner.invoke, app, [*args, "--home", str(bot.settings.home)])


async def test_a_tool_call_leaves_a_complete_record(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel, channel: MemoryChannel
) -> None:
    (bot.workspace.root / "notes.md").write_text("buy milk")
    scripted.add(call("file_read", path="notes.md"), "It says buy milk.")

    await chat.say("read my notes")

    (record,) = await bot.store.audit.all()
    assert (record.kind, record.tool, record.status, record.error) == (
        "tool_call",
        "file_read",
        "ok",
        None,
    )
    assert record.session_key == parent_key(channel)
    assert record.agent_id == "main"
    assert record.arguments == {"path": "notes.md"}
    assert record.requested == record.granted == ("tool:file_read", "path:notes.md")
    assert record.step_id == f"{record.run_id}.1"
    assert record.trace_id == record.task_id == record.run_id  # a person's own message
    assert record.ended_at is not None and record.ended_at >= record.started_at
    assert record.approval_required is False


async def test_a_failing_call_is_recorded_with_its_error(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(call("file_read", path="missing.md"), "There is no such file.")

    await chat.say("read missing.md")

    (record,) = await bot.store.audit.all()
    assert record.status == "error"
    assert record.error is not None and "missing.md" in record.error


async def test_a_call_to_a_tool_the_agent_lacks_is_recorded_as_refused_with_nothing_granted(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(call("no_such_tool", x=1), "I cannot.")

    await chat.say("do it")

    (record,) = await bot.store.audit.all()
    assert (record.tool, record.status) == ("no_such_tool", "refused")
    assert record.requested == ("tool:no_such_tool",)
    assert record.granted == ()


async def test_secrets_in_arguments_are_masked_in_the_record(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(call("file_write", path="k.txt", content=f"key={OPENAI_KEY}"), "Saved.")

    await chat.say("save my key")

    (record,) = await bot.store.audit.all()
    assert record.arguments == {"path": "k.txt", "content": "key=[redacted]"}


async def test_a_call_cancelled_mid_way_is_completed_as_an_error(
    settings: Settings, scripted: ScriptedModel
) -> None:
    started = asyncio.Event()
    tools = ToolRegistry()

    @tools.tool()
    async def wait_forever() -> str:
        """Never returns."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    scripted.add(call("wait_forever"))
    async with await Clawbot.open(settings, tools=tools) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        receipt = await bot.router.receive(channel.message("wait"))
        await started.wait()
        running = await bot.store.audit.all()
        await bot.router.handle(channel.message("/stop"))
        await receipt.wait()

        (record,) = await bot.store.audit.all()
    assert [r.status for r in running] == ["running"]
    assert record.status == "error"
    assert record.error == "the call was cancelled or failed"


async def test_a_run_with_a_subagent_is_one_trace_across_both_sessions(
    workers: Clawbot, chat: Chat, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    folder = workers.workspace.root / "agents" / "worker"
    folder.mkdir(parents=True)
    (folder / "a.md").write_text("alpha")

    def parent(request: ModelRequest) -> Step:
        if request.last_user_text == "research":
            return call("sessions_spawn", task="read a.md", agent="worker")
        return "spawned" if request.messages[-1]["role"] == "tool" else "thanks"

    def child(request: ModelRequest) -> Step:
        rounds = len(request.tool_results)
        if rounds == 0:
            return call("list_dir", path="agents/worker")
        if rounds == 1:
            return call("file_read", path="agents/worker/a.md")
        return "a.md says alpha"

    scripted.function = parent
    worker.function = child
    await chat.say("research")
    await workers.scheduler.wait_idle()

    every = await workers.store.audit.all()
    records = [r for r in every if r.kind == "tool_call"]
    assert [(r.agent_id, r.tool, r.status) for r in records] == [
        ("main", "sessions_spawn", "ok"),
        ("worker", "list_dir", "ok"),
        ("worker", "file_read", "ok"),
    ]
    # the parent's next turn read the child's report as an ephemeral block: in the trace too
    assert [(r.agent_id, r.kind) for r in every if r.kind != "tool_call"] == [("main", "context")]
    assert len({r.trace_id for r in every}) == 1
    spawn, *child_calls = records
    assert {r.task_id for r in child_calls} != {spawn.task_id}
    assert [r.step_id.rsplit(".", 1)[1] for r in child_calls] == ["1", "2"]

    shown = await shell(["audit", "show", "--trace", spawn.trace_id], workers)
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert lines[0] == f"trace {spawn.trace_id}: 3 tool calls in 2 sessions"
    assert lines[1] == f"{spawn.session_key} (main)"
    assert "sessions_spawn" in lines[2]
    assert lines[3].startswith("  internal:") and lines[3].endswith("(worker)")
    assert "list_dir" in lines[4] and lines[4].startswith("    #")
    assert "file_read path=agents/worker/a.md → ok" in lines[5]


async def test_the_tail_and_the_export_read_the_records_from_the_shell(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(call("list_dir"), call("list_dir", path="."), "done")
    await chat.say("look")

    tail = await shell(["audit", "tail", "-n", "1"], bot)
    export = await shell(["audit", "export", "--format", "jsonl"], bot)

    assert tail.exit_code == 0, tail.output
    (line,) = tail.stdout.splitlines()
    assert line.startswith("#2 ") and "list_dir path=. → ok" in line
    assert export.exit_code == 0, export.output
    rows = [json.loads(text) for text in export.stdout.splitlines()]
    assert [row["id"] for row in rows] == [1, 2]
    assert set(rows[0]) >= {
        "trace_id",
        "task_id",
        "run_id",
        "step_id",
        "tool",
        "arguments",
        "requested_capabilities",
        "granted_capabilities",
        "approval_required",
        "approval_result",
        "start_at",
        "end_at",
        "status",
        "error",
    }


def test_an_unknown_trace_fails_with_one_clear_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["audit", "show", "--trace", "nope", "--home", str(tmp_path)])

    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "clawbot: no audit record has the trace id 'nope' (`clawbot audit tail` shows some)"
    ]
