"""A restart while an approval waits resumes the turn AT the call the person was shown: the
round it waited in is saved with the request, so the model is not asked again for that
step (a re-run would often make another call), the shown call runs once approved (or the
model is told of the denial), and the calls of the round that ran before the restart are
not run again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from clawbot.app import Clawbot
from clawbot.clock import Clock, ManualClock
from clawbot.messages import OutboundMessage
from clawbot.policies import ToolPolicy
from clawbot.settings import Settings
from clawbot.store.approvals import SqlApprovals
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel, Step, call

from .conftest import add_agent
from .test_approvals import command, is_request, request_id, supervised, writes


async def no_clearing(_approvals: SqlApprovals, _turn_id: str) -> int:
    return 0


def fresh_asks(scripted: ScriptedModel) -> int:
    """How many times the model was asked to start the turn afresh (no tool results yet)."""
    return sum(not request.tool_results for request in scripted.requests)


def rerun_differs(then: Step) -> Callable[[ModelRequest], Step]:
    """A model that writes a.md when first asked, and would write b.md if asked afresh
    again (as a real model's re-run often differs); ``then`` once it has tool results."""
    asked: list[ModelRequest] = []

    def reply(request: ModelRequest) -> Step:
        if request.tool_results:
            return then
        asked.append(request)
        return writes("a.md", "original") if len(asked) == 1 else writes("b.md", "other")

    return reply


def the_end(final: str) -> Callable[[OutboundMessage], bool]:
    """The turn's final answer, or a new approval request (asked again: the flaw)."""
    return lambda message: message.text == final or is_request(message)


async def asked_then_stopped(
    settings: Settings, text: str = "write", *, clock: Clock | None = None
) -> str:
    """Run a turn until its approval request is sent, then stop clawbot; the request's id."""
    async with await Clawbot.open(settings, clock=clock) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await bot.router.receive(channel.message(text))
        return request_id(await channel.sent_when(is_request))


async def test_after_a_restart_the_call_that_was_shown_runs_once_approved(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    scripted.function = rerun_differs("Written after the restart.")
    settings = supervised(tmp_path, scripted)
    rid = await asked_then_stopped(settings)

    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await bot.scheduler.start()
        answered = await command(bot, channel, f"/approve {rid}")
        end = await channel.sent_when(the_end("Written after the restart."))

    workspace = tmp_path / "home" / "workspace"
    assert end.text == "Written after the restart."  # and no second request
    assert answered == f"Approved once: file_write ({rid})."
    assert (workspace / "a.md").read_text() == "original"
    assert not (workspace / "b.md").exists()
    assert fresh_asks(scripted) == 1  # the step was not asked of the model again
    assert not any(is_request(m) for m in channel.sent)


async def test_a_denial_after_a_restart_reaches_the_model_and_the_call_never_runs(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    scripted.function = rerun_differs("I will not write it then.")
    settings = supervised(tmp_path, scripted)
    rid = await asked_then_stopped(settings)

    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await bot.scheduler.start()
        await command(bot, channel, f"/deny {rid}")
        end = await channel.sent_when(the_end("I will not write it then."))

    workspace = tmp_path / "home" / "workspace"
    assert end.text == "I will not write it then."
    assert not (workspace / "a.md").exists()
    assert not (workspace / "b.md").exists()
    (told,) = scripted.requests[-1].tool_results
    assert told.startswith(
        f"error: not run: the person denied this call (file_write, request {rid}"
    )
    assert not any(is_request(m) for m in channel.sent)


async def test_a_request_that_expired_while_clawbot_was_down_is_denied_at_the_next_start(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    scripted.function = rerun_differs("Nobody answered, so I did not write it.")
    settings = supervised(tmp_path, scripted, approval_timeout=300)
    asked = ManualClock()
    rid = await asked_then_stopped(settings, clock=asked)
    after_expiry = ManualClock(asked.now() + timedelta(seconds=301))

    async with await Clawbot.open(settings, clock=after_expiry) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await bot.scheduler.start()
        end = await channel.sent_when(the_end("Nobody answered, so I did not write it."))
        stored = await bot.store.approvals.get(rid)
        late = await command(bot, channel, f"/approve {rid}")

    workspace = tmp_path / "home" / "workspace"
    assert end.text == "Nobody answered, so I did not write it."  # and no second request
    (told,) = scripted.requests[-1].tool_results
    assert told.startswith(
        f"error: not run: nobody answered the approval request {rid} for file_write within 300 s"
    )
    assert stored is not None and stored.status == "expired"
    assert late == f"Request {rid} was already expired."
    assert not (workspace / "a.md").exists()
    assert not (workspace / "b.md").exists()
    assert fresh_asks(scripted) == 1


async def test_a_call_of_the_round_that_ran_before_the_restart_is_not_run_again(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    workspace = tmp_path / "home" / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "notes.md").write_text("before the restart")

    def reply(request: ModelRequest) -> Step:
        if request.tool_results:
            return "Done."
        return [
            call("file_read", path="notes.md"),
            call("file_write", path="a.md", content="hello"),
        ]

    scripted.function = reply
    settings = supervised(tmp_path, scripted)
    rid = await asked_then_stopped(settings)
    (workspace / "notes.md").write_text("changed while clawbot was down")

    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await bot.scheduler.start()
        await command(bot, channel, f"/approve {rid}")
        await channel.sent_when(lambda m: m.text == "Done.")
        records = await bot.store.audit.all()
        reads = [r for r in records if r.kind == "tool_call" and r.tool == "file_read"]

    read, written = scripted.requests[-1].tool_results
    assert (read, written.startswith("error")) == ("before the restart", False)
    assert len(reads) == 1  # run once, before the restart
    assert (workspace / "a.md").read_text() == "hello"


async def test_an_unsafe_call_approved_before_a_restart_asks_again_when_repeated_after_it(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    def reply(request: ModelRequest) -> Step:
        done = len(request.tool_results)
        return [writes("a.md"), writes("b.md"), writes("a.md")][done] if done < 3 else "Done."

    scripted.function = reply
    profiles = {"default": {"risk": {"file_write": "unsafe"}}}
    settings = supervised(tmp_path, scripted, risk_profiles=profiles)
    async with await Clawbot.open(settings) as bot:
        first = MemoryChannel()
        bot.connect(first)
        await bot.router.receive(first.message("write"))
        a = request_id(await first.sent_when(is_request))
        await command(bot, first, f"/approve {a} once")
        b = request_id(await first.sent_when(lambda m: is_request(m) and a not in m.text))

    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await bot.scheduler.start()
        await command(bot, channel, f"/approve {b} once")
        asked = await channel.sent_when(the_end("Done."))
        assert is_request(asked), "the repeated unsafe call ran on the earlier approval"
        again = request_id(asked)
        await command(bot, channel, f"/deny {again}")
        await channel.sent_when(lambda m: m.text == "Done.")

    assert again not in (a, b)
    told = scripted.requests[-1].tool_results[-1]
    assert told.startswith(
        f"error: not run: the person denied this call (file_write, request {again}"
    )


async def test_a_round_stored_just_before_a_stop_is_not_run_again_from_its_saved_copy(
    tmp_path: Path, scripted: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process stopped after the approved round reached the transcript and before its
    saved copy was cleared (here: it is never cleared in the first process)."""
    reached, never = asyncio.Event(), asyncio.Event()

    async def reply(request: ModelRequest) -> Step:
        if not request.tool_results:
            return writes("a.md")
        if len(scripted.requests) == 2:
            reached.set()
            await never.wait()  # the first process stops during this model call
        return "Done."

    scripted.function = reply
    settings = supervised(tmp_path, scripted)
    with monkeypatch.context() as patched:
        patched.setattr(SqlApprovals, "clear_rounds", no_clearing)
        async with await Clawbot.open(settings) as bot:
            first = MemoryChannel()
            bot.connect(first)
            await bot.router.receive(first.message("write"))
            rid = request_id(await first.sent_when(is_request))
            await command(bot, first, f"/approve {rid}")
            await reached.wait()

    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await bot.scheduler.start()
        await channel.sent_when(the_end("Done."))
        records = await bot.store.audit.all()
        writes_run = [r for r in records if r.kind == "tool_call" and r.tool == "file_write"]

    assert [r.status for r in writes_run] == ["ok"]
    assert scripted.requests[-1].tool_results == scripted.requests[1].tool_results


async def test_a_subagents_waiting_call_resumes_after_a_restart(
    tmp_path: Path, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    def parent(request: ModelRequest) -> Step:
        if request.last_user_text == "research":
            return call("sessions_spawn", task="remember it", agent="worker")
        return "ok"

    fresh: list[ModelRequest] = []

    def child(request: ModelRequest) -> Step:
        if request.tool_results:
            return "remembered"
        fresh.append(request)
        key, text = ("shown", "original") if len(fresh) == 1 else ("other", "a re-run")
        return call("memory_store", key=key, text=text)

    scripted.function, worker.function = parent, child
    settings = supervised(tmp_path, scripted, grants=["sessions_spawn"])
    async with await Clawbot.open(settings) as bot:
        first = MemoryChannel()
        bot.connect(first)
        await add_agent(
            bot, "worker", model=worker.model_string, tools=ToolPolicy(allow=("memory_store",))
        )
        await bot.router.handle(first.message("research"))
        rid = request_id(await first.sent_when(is_request))

    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await bot.scheduler.start()
        await command(bot, channel, f"/approve {rid}")
        end = await channel.sent_when(the_end("ok"))  # the parent, told by its child
        assert end.text == "ok", "the child was asked again"
        await bot.scheduler.wait_idle()
        stored = [(m.key, m.text) for m in await bot.store.memories.list()]

    assert stored == [("shown", "original")]
    assert len(fresh) == 1
    assert not any(is_request(m) for m in channel.sent)


async def test_a_saved_round_keeps_no_secret(tmp_path: Path, scripted: ScriptedModel) -> None:
    key = "sk-proj-" + "A1b2C3d4" * 5
    workspace = tmp_path / "home" / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "env.txt").write_text(f"OPENAI_API_KEY={key}")
    scripted.add([call("file_read", path="env.txt"), call("file_write", path="a.md", content="x")])
    settings = supervised(tmp_path, scripted)
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await bot.router.receive(channel.message("read, then write"))
        rid = request_id(await channel.sent_when(is_request))
        paused = await bot.store.approvals.paused_round(
            (await bot.store.approvals.get(rid) or pytest.fail("no request")).turn_id
        )

    assert paused is not None
    assert paused.results[0].content == "OPENAI_API_KEY=[redacted]"
