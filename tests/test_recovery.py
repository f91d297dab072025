"""Nothing lost, nothing stuck: leases, take-over after a crash, attempts, shutdown, resending
replies, the watchdog, and a real process killed with SIGKILL mid-turn."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sqlite3
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from clawbot.app import Clawbot
from clawbot.channels.interface import ChannelLimits, SentMessage
from clawbot.channels.rendering import MARKUPS, Markup, render_parts
from clawbot.clock import ManualClock
from clawbot.messages import OutboundMessage
from clawbot.runtime.llm import ModelClient
from clawbot.runtime.replies import ModelReply
from clawbot.scheduling.notices import gave_up_notice
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel, Step, call

from .standins.openai_api import OpenAIStandin
from .test_cli import chat_killed_when_the_model_hangs, environment, run
from .test_scheduler import Steps


class HeldModel:
    """The first model call waits until ``release`` is set; later calls answer at once."""

    def __init__(self, scripted: ScriptedModel, first: str, later: str) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.scripted = scripted
        self.first, self.later = first, later
        scripted.function = self.answer

    async def answer(self, request: ModelRequest) -> str:
        if len(self.scripted.requests) == 1:
            self.entered.set()
            await self.release.wait()
            return self.first
        return self.later


async def test_a_job_whose_lease_expired_is_taken_over_and_the_stale_runner_stays_silent(
    settings: Settings, scripted: ScriptedModel
) -> None:
    clock = ManualClock()
    model = HeldModel(scripted, first="stale answer", later="Here is the report.")
    async with await Clawbot.open(settings, clock=clock) as crashed:
        lost = MemoryChannel()
        crashed.connect(lost)
        receipt = await crashed.router.receive(lost.message("write the report"))
        await model.entered.wait()
        await crashed.scheduler.tick()  # its housekeeping runs long before the lease lapses
        async with await Clawbot.open(settings, clock=clock) as restarted:
            channel = MemoryChannel()
            restarted.connect(channel)
            await restarted.start()
            still_leased = (list(channel.texts), len(scripted.requests))

            clock.advance(settings.job_lease + 1)
            await restarted.scheduler.tick()
            await restarted.scheduler.wait_idle()
            model.release.set()
            stale = await receipt.wait()
            stored = await restarted.store.transcripts.load("memory:chat1", 0)
            jobs = await restarted.store.jobs.for_session("memory:chat1")

    assert still_leased == ([], 1)
    assert channel.texts == ["Here is the report."]
    assert [m["content"] for m in scripted.requests[1].messages[1:]] == ["write the report"]
    assert (stale.kind, lost.texts) == ("deferred", [])
    assert [e.text for e in stored] == ["write the report", "Here is the report."]
    assert [j.status for j in jobs] == ["done"]


async def test_a_taken_over_turn_closes_the_jobs_merged_into_it(
    settings: Settings, scripted: ScriptedModel
) -> None:
    clock = ManualClock()
    crashed, release = await crash_during_a_backlog_turn(settings, clock, scripted)
    try:
        async with await Clawbot.open(settings, clock=clock) as restarted:
            channel = MemoryChannel()
            restarted.connect(channel)
            await restarted.start()
            clock.advance(settings.job_lease + 1)
            await restarted.scheduler.tick()
            await restarted.scheduler.wait_idle()
            jobs = await restarted.store.jobs.for_session("memory:chat1")
    finally:
        release.set()
        await crashed.close()

    assert channel.texts == ["answer 3"]
    assert [j.status for j in jobs] == ["done", "done", "done"]


async def test_a_job_out_of_attempts_is_failed_with_a_notice_quoting_its_message(
    settings: Settings, scripted: ScriptedModel
) -> None:
    settings = settings.model_copy(update={"job_max_attempts": 1})
    clock = ManualClock()
    model = HeldModel(scripted, first="stale answer", later="unused")
    async with await Clawbot.open(settings, clock=clock) as crashed:
        lost = MemoryChannel()
        crashed.connect(lost)
        receipt = await crashed.router.receive(lost.message("write the report"))
        await model.entered.wait()
        await crashed.scheduler.tick()  # its housekeeping runs long before the lease lapses
        async with await Clawbot.open(settings, clock=clock) as restarted:
            channel = MemoryChannel()
            restarted.connect(channel)
            clock.advance(settings.job_lease + 1)

            await restarted.start()
            model.release.set()
            await receipt.wait()
            jobs = await restarted.store.jobs.for_session("memory:chat1")

    assert channel.texts == [
        "Sorry, I could not finish your message `write the report`: clawbot was interrupted "
        "while working on it. Please send it again."
    ]
    assert len(scripted.requests) == 1
    assert lost.texts == []
    assert [(j.status, j.error) for j in jobs] == [
        ("failed", "gave up after 1 interrupted attempts")
    ]


async def crash_during_a_backlog_turn(
    settings: Settings, clock: ManualClock, scripted: ScriptedModel
) -> tuple[Clawbot, asyncio.Event]:
    """A process that answered "one", began the [Backlog] turn of "two" and "three" that
    waited meanwhile, and crashed in it (its lease runs out when the clock moves past it).
    Returns the process, to close at the end, and the event that ends its held turn."""
    held = [asyncio.Event(), asyncio.Event()]
    release = [asyncio.Event(), asyncio.Event()]

    async def answer(request: ModelRequest) -> str:
        calls = len(scripted.requests)
        if calls <= 2:
            held[calls - 1].set()
            await release[calls - 1].wait()
        return f"answer {calls}"

    scripted.function = answer
    crashed = await Clawbot.open(settings, clock=clock)
    lost = MemoryChannel()
    crashed.connect(lost)
    await crashed.router.receive(lost.message("one"))
    await held[0].wait()
    for text in ("two", "three"):
        await crashed.router.receive(lost.message(text))
    release[0].set()
    await held[1].wait()
    return crashed, release[1]


async def test_a_backlog_turn_out_of_attempts_quotes_each_message_it_gives_up_on(
    settings: Settings, scripted: ScriptedModel
) -> None:
    settings = settings.model_copy(update={"job_max_attempts": 1})
    clock = ManualClock()
    crashed, release = await crash_during_a_backlog_turn(settings, clock, scripted)
    try:
        async with await Clawbot.open(settings, clock=clock) as restarted:
            channel = MemoryChannel()
            restarted.connect(channel)
            clock.advance(settings.job_lease + 1)
            await restarted.start()
            await restarted.scheduler.wait_idle()
            jobs = await restarted.store.jobs.for_session("memory:chat1")
    finally:
        release.set()
        await crashed.close()

    assert channel.texts == [
        "Sorry, I could not finish 2 of your messages: clawbot was interrupted while working "
        "on them. Please send them again:\n1. `two`\n2. `three`"
    ]
    assert [j.status for j in jobs] == ["done", "failed", "failed"]


async def test_a_give_up_notice_a_crash_kept_from_going_out_is_sent_at_the_next_start(
    settings: Settings, scripted: ScriptedModel
) -> None:
    settings = settings.model_copy(update={"job_max_attempts": 1})
    clock = ManualClock()
    crashed, release = await crash_during_a_backlog_turn(settings, clock, scripted)
    clock.advance(settings.job_lease + 1)
    dying = await Clawbot.open(settings, clock=clock)
    stuck = StuckChannel()
    dying.connect(stuck)
    giving_up = asyncio.create_task(dying.start())
    try:
        await stuck.sending.wait()  # the job is failed; the notice never gets out
        async with await Clawbot.open(settings, clock=clock) as restarted:
            channel = MemoryChannel()
            restarted.connect(channel)
            await restarted.start()
            await restarted.scheduler.shutdown()  # writes the marks of what it sent
            unreplied = await restarted.store.jobs.unreplied()
    finally:
        giving_up.cancel()
        release.set()
        await dying.close()
        await crashed.close()

    assert channel.texts == [
        "Sorry, I could not finish 2 of your messages: clawbot was interrupted while working "
        "on them. Please send them again:\n1. `two`\n2. `three`"
    ]
    assert unreplied == []


async def test_a_resumed_turn_out_of_attempts_quotes_each_message_it_answers_once(
    settings: Settings, scripted: ScriptedModel
) -> None:
    """ "two" and "three" wait during "one"; their turn is steered away at a tool boundary by
    "four", and the process crashes while it resumes them."""
    settings = settings.model_copy(update={"job_max_attempts": 1})
    clock = ManualClock()
    steps = Steps()
    steps.hold(1)
    one, resuming = asyncio.Event(), asyncio.Event()
    release = asyncio.Event()

    async def answer(request: ModelRequest) -> Step:
        text = request.last_user_text
        if text == "one":
            one.set()
            await release.wait()
        if text.startswith("[Backlog]\nMessages"):
            return call("step", n=1)
        if text.startswith("[Backlog]\nInterrupted"):
            resuming.set()
            await release.wait()
        return f"answer to {text}"

    scripted.function = answer
    crashed = await Clawbot.open(settings, clock=clock, tools=steps.registry())
    lost = MemoryChannel()
    crashed.connect(lost)
    try:
        await crashed.router.receive(lost.message("one"))
        await one.wait()
        for text in ("two", "three"):
            await crashed.router.receive(lost.message(text))
        release.set()
        await steps.entered[1].wait()
        release.clear()
        await crashed.router.receive(lost.message("four"))
        steps.release(1)
        await resuming.wait()
        async with await Clawbot.open(settings, clock=clock, tools=steps.registry()) as restarted:
            channel = MemoryChannel()
            restarted.connect(channel)
            clock.advance(settings.job_lease + 1)
            await restarted.start()
            await restarted.scheduler.wait_idle()
    finally:
        release.set()
        await crashed.close()

    assert lost.texts == ["answer to one", "answer to four"]
    assert channel.texts == [
        "Sorry, I could not finish 2 of your messages: clawbot was interrupted while working "
        "on them. Please send them again:\n1. `two`\n2. `three`"
    ]


@pytest.mark.parametrize("markup", MARKUPS)
def test_a_notice_shows_each_quoted_message_as_typed_on_every_platform(markup: Markup) -> None:
    typed = ["[notes]: https://example.com", "*not bold* and `code`", "word " * 40]

    [part] = render_parts(gave_up_notice(typed, 3), ChannelLimits(markup=markup))

    assert (
        "[notes]: https://example.com" in part.text and "[notes]: https://example.com" in part.plain
    )
    assert "*not bold* and `code`" in part.plain
    assert ("word " * 20).strip() in part.plain and ("word " * 21) not in part.plain


class LoadingClient(ModelClient):
    """The model client of a process in its first seconds, litellm still importing: every
    call waits for the import, which ends when ``ready`` is set (never, for a process that
    is killed meanwhile). ``waiting`` is set once a turn waits for it."""

    def __init__(self) -> None:
        super().__init__(retries=0, backoff=0)
        self.ready = asyncio.Event()
        self.waiting = asyncio.Event()

    def loaded(self) -> bool:
        return self.ready.is_set()

    async def load(self) -> None:
        self.waiting.set()
        await self.ready.wait()

    async def complete(self, *args: Any, **kwargs: Any) -> ModelReply:
        await self.load()
        return await super().complete(*args, **kwargs)


async def test_a_message_taken_while_the_model_client_loads_counts_no_attempt_yet(
    settings: Settings, scripted: ScriptedModel
) -> None:
    settings = settings.model_copy(update={"job_max_attempts": 1})
    clock = ManualClock()
    scripted.add("Hello!")
    loading = LoadingClient()
    killed = await Clawbot.open(settings, clock=clock, client=loading)
    try:
        lost = MemoryChannel()
        killed.connect(lost)
        await killed.router.receive(lost.message("hello"))
        await loading.waiting.wait()  # killed here, before litellm was in
        [stored] = await killed.store.jobs.open()
        clock.advance(settings.job_lease + 1)
        async with await Clawbot.open(settings, clock=clock) as restarted:
            channel = MemoryChannel()
            restarted.connect(channel)
            await restarted.start()
            await restarted.scheduler.wait_idle()
    finally:
        await killed.scheduler.shutdown(timeout=0)
        await killed.close()

    assert (stored.status, stored.attempts) == ("queued", 0)
    assert channel.texts == ["Hello!"]


async def test_a_crashed_turn_is_taken_over_only_once_the_model_client_is_loaded(
    settings: Settings, scripted: ScriptedModel
) -> None:
    """Killed at the model, then killed again while loading, then started: the second kill
    does not count, so the third start runs the turn instead of giving it up."""
    settings = settings.model_copy(update={"job_max_attempts": 2})
    clock = ManualClock()
    model = HeldModel(scripted, first="stale answer", later="Here is the report.")
    async with await Clawbot.open(settings, clock=clock) as crashed:
        crashed.connect(MemoryChannel())
        await crashed.router.receive(MemoryChannel().message("write the report"))
        await model.entered.wait()
        await crashed.scheduler.tick()  # its housekeeping runs long before the lease lapses
        clock.advance(settings.job_lease + 1)
        loading = LoadingClient()
        killed = await Clawbot.open(settings, clock=clock, client=loading)
        try:
            killed.connect(MemoryChannel())
            await killed.start()
            await loading.waiting.wait()  # killed here, before litellm was in
            [job] = await killed.store.jobs.open()
            async with await Clawbot.open(settings, clock=clock) as restarted:
                channel = MemoryChannel()
                restarted.connect(channel)
                await restarted.start()
                await restarted.scheduler.wait_idle()
        finally:
            await killed.scheduler.shutdown(timeout=0)
            await killed.close()
        model.release.set()

    assert (job.owner, job.attempts) == (crashed.store.owner, 1)
    assert channel.texts == ["Here is the report."]


async def test_a_long_turn_renews_its_lease_so_no_other_process_takes_it_over(
    settings: Settings, scripted: ScriptedModel
) -> None:
    clock = ManualClock()
    start = clock.now()
    model = HeldModel(scripted, first="Done at last.", later="unused")
    async with await Clawbot.open(settings, clock=clock) as runner:
        channel = MemoryChannel()
        runner.connect(channel)
        receipt = await runner.router.receive(channel.message("a long job"))
        await model.entered.wait()
        clock.advance(settings.job_lease / 2)
        await runner.scheduler.tick()
        clock.advance(settings.job_lease / 2 + 1)  # past the first lease, within the renewal

        async with await Clawbot.open(settings, clock=clock) as other:
            other.connect(MemoryChannel())
            await other.start()
            await other.scheduler.tick()
            [job] = await other.store.jobs.open()
        model.release.set()
        await receipt.wait()

    assert (job.owner, job.lease_until) == (
        runner.store.owner,
        start + timedelta(seconds=settings.job_lease * 1.5),
    )
    assert len(scripted.requests) == 1
    assert channel.texts == ["Done at last."]


async def test_the_watchdog_logs_a_session_holding_its_turn_too_long(
    settings: Settings, scripted: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    model = HeldModel(scripted, first="ok", later="ok")
    async with await Clawbot.open(settings, clock=clock) as bot:
        bot.connect(MemoryChannel())
        receipt = await bot.router.receive(MemoryChannel().message("think hard"))
        await model.entered.wait()
        with caplog.at_level(logging.WARNING, logger="clawbot.scheduler"):
            clock.advance(settings.turn_watchdog - 1)
            await bot.scheduler.tick()
            clock.advance(1)
            await bot.scheduler.tick()
            clock.advance(1)
            await bot.scheduler.tick()
        model.release.set()
        await receipt.wait()

    assert receipt.job is not None
    warnings = [r for r in caplog.records if r.name == "clawbot.scheduler"]
    assert [r.getMessage() for r in warnings] == [
        f"watchdog: session memory:chat1 has held its turn for 5 minutes "
        f"(job {receipt.job.job_id}, main lane)"
    ]


async def test_shutdown_lets_a_turn_reach_a_tool_boundary_and_it_resumes_after_restart(
    settings: Settings, scripted: ScriptedModel
) -> None:
    steps = Steps()
    steps.hold(1)
    scripted.add(call("step", n=1), call("step", n=2), "Finished after the restart.")
    bot = await Clawbot.open(settings, tools=steps.registry())
    bot.connect(MemoryChannel())
    receipt = await bot.router.receive(MemoryChannel().message("do the steps"))
    await steps.entered[1].wait()

    closing = asyncio.create_task(bot.close())
    await asyncio.sleep(0)  # let close() begin: intake stops, turns are asked to yield
    assert bot.scheduler.closing
    steps.release(1)
    await closing
    outcome = await receipt.wait()
    async with await Clawbot.open(settings, tools=steps.registry()) as again:
        channel = MemoryChannel()
        again.connect(channel)
        await again.start()
        await again.scheduler.wait_idle()

    assert outcome.kind == "deferred"
    assert channel.texts == ["Finished after the restart."]
    assert steps.ran == [1, 2]
    assert scripted.requests[2].last_user_text == (
        "[Backlog]\n"
        "Interrupted work to resume:\n"
        '1. Resume the task you were working on when clawbot restarted: "do the steps"\n'
        "Tool calls already made (full results are earlier in this chat):\n"
        '- step({"n": 1}) -> step 1 done\n'
        "Continue from where you stopped."
    )


async def test_shutdown_keeps_a_turn_that_missed_its_timeout_as_a_job_resumed_after_restart(
    settings: Settings, scripted: ScriptedModel
) -> None:
    model = HeldModel(scripted, first="never sent", later="The essay, at last.")
    bot = await Clawbot.open(settings)
    bot.connect(MemoryChannel())
    receipt = await bot.router.receive(MemoryChannel().message("write the essay"))
    await model.entered.wait()

    await bot.scheduler.shutdown(timeout=0.05)
    [job] = await bot.store.jobs.open()
    await bot.close()
    async with await Clawbot.open(settings) as again:
        channel = MemoryChannel()
        again.connect(channel)
        await again.start()
        await again.scheduler.wait_idle()

    assert (await receipt.wait()).kind == "deferred"
    assert (job.status, job.owner, job.lease_until) == ("queued", None, None)
    assert channel.texts == ["The essay, at last."]
    assert [m["content"] for m in scripted.requests[1].messages[1:]] == ["write the essay"]


class StuckChannel(MemoryChannel):
    """A platform that never confirms a send: the process dies with the reply unsent."""

    def __init__(self) -> None:
        super().__init__()
        self.sending = asyncio.Event()
        self.released = asyncio.Event()
        """Set at the end of a test: the send returns, unconfirmed, so the process can close."""

    async def send(self, message: OutboundMessage) -> list[SentMessage]:
        self.sending.set()
        await self.released.wait()
        return []


async def test_a_reply_stored_but_maybe_unsent_before_a_crash_is_sent_at_start_up(
    settings: Settings, scripted: ScriptedModel
) -> None:
    clock = ManualClock()
    scripted.add("Hello from before the crash.")
    crashed = await Clawbot.open(settings, clock=clock)
    stuck = StuckChannel()
    crashed.connect(stuck)
    await crashed.router.receive(stuck.message("hi"))
    await stuck.sending.wait()
    await crashed.store.flush()  # as its write-behind does within a fraction of a second
    try:
        async with await Clawbot.open(settings, clock=clock) as restarted:
            channel = MemoryChannel()
            restarted.connect(channel)
            clock.advance(settings.job_lease + 1)
            await restarted.start()
            await restarted.scheduler.shutdown()
            [job] = await restarted.store.jobs.for_session("memory:chat1")
            unreplied = await restarted.store.jobs.unreplied()
    finally:
        await crashed.scheduler.shutdown(timeout=0)
        await crashed.close()

    assert channel.texts == ["Hello from before the crash."]
    assert job.status == "done"
    assert unreplied == []


async def test_a_deadline_notice_a_crash_kept_from_going_out_is_sent_at_the_next_start(
    settings: Settings, scripted: ScriptedModel
) -> None:
    async def forever(request: ModelRequest) -> str:
        await asyncio.Event().wait()
        return "never"

    scripted.function = forever
    clock = ManualClock()
    dying = await Clawbot.open(settings.model_copy(update={"turn_deadline": 0.2}), clock=clock)
    stuck = StuckChannel()
    dying.connect(stuck)
    try:
        await dying.router.receive(stuck.message("take forever"))
        await stuck.sending.wait()  # the deadline passed; its notice never gets out
        async with await Clawbot.open(settings, clock=clock) as restarted:
            channel = MemoryChannel()
            restarted.connect(channel)
            clock.advance(settings.job_lease + 1)
            await restarted.start()
            await restarted.scheduler.shutdown()
            unreplied = await restarted.store.jobs.unreplied()
    finally:
        stuck.released.set()
        await dying.scheduler.shutdown(timeout=0)
        await dying.close()

    assert channel.texts == [
        "Sorry, I could not finish your message `take forever`: turn deadline of 0.2 s exceeded."
        " Please send it again."
    ]
    assert unreplied == []


async def test_a_redelivered_message_keeps_the_reply_marks_it_would_have_carried(
    settings: Settings, scripted: ScriptedModel
) -> None:
    clock = ManualClock()
    scripted.add("Hello once.")
    async with await Clawbot.open(settings, clock=clock) as bot:
        first = MemoryChannel()
        bot.connect(first)
        await bot.router.handle(first.message("hi", message_id="m1"))
        # Redelivered before the reply's mark was written: it is dropped, but the mark that
        # would have ridden with its write must still reach the database.
        await bot.router.receive(first.message("hi", message_id="m1"))
    clock.advance(settings.job_lease + 1)
    async with await Clawbot.open(settings, clock=clock) as restarted:
        second = MemoryChannel()
        restarted.connect(second)
        await restarted.start()
        await restarted.scheduler.wait_idle()

    assert first.texts == ["Hello once."]
    assert second.texts == []


def test_a_process_killed_mid_turn_resumes_the_turn_after_a_restart(
    standin: OpenAIStandin, tmp_path: Path
) -> None:
    standin.script = ["Noted.", {"hang": True}]
    env = environment(tmp_path / "home", standin)
    before = chat_killed_when_the_model_hangs(
        standin, env, tmp_path, b"remember the milk\nnow write the report\n", "the second turn"
    )

    restarted = run(["chat"], b"", env, tmp_path)

    assert before == "Noted.\n"
    assert restarted.returncode == 0, restarted.stderr.decode()
    assert restarted.stdout.decode() == "echo: now write the report\n"
    users = [m["content"] for m in standin.requests[-1]["messages"] if m["role"] == "user"]
    assert users == ["remember the milk", "now write the report"]
    # The second turn was in the intake journal only (still at the model): the restart
    # stored it from there. So was the first, with its answer, unless it came before litellm
    # was loaded: then it waited queued, and its start committed it.
    assert re.search(r"recovered [12] accepted message\(s\)", restarted.stderr.decode())
    assert "resuming job" in restarted.stderr.decode()


def damage(database: Path, table: str) -> None:
    """Overwrite the first page of ``table`` in the database file with bytes no page holds,
    as a disk or a stray write would (the WAL written back first, so the page is current)."""
    with contextlib.closing(sqlite3.connect(database)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (page_size,) = db.execute("PRAGMA page_size").fetchone()
        (root,) = db.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()
    with database.open("r+b") as file:
        file.seek((root - 1) * page_size)
        file.write(b"\xff" * page_size)


def assert_refused_as_damaged(result: subprocess.CompletedProcess[bytes], database: Path) -> None:
    """Exit 1 with one line on stderr naming the damaged file and what to do, nothing else."""
    err = result.stderr.decode()
    assert result.returncode == 1, err
    assert err.splitlines() == [
        f"clawbot: the database {database} is damaged or not a clawbot database "
        "(database disk image is malformed) — move the file aside (or restore a backup) and "
        "clawbot will create a fresh one"
    ]
    assert result.stdout == b""


def test_chat_on_a_damaged_database_exits_1_with_one_line_saying_what_to_do(
    standin: OpenAIStandin, tmp_path: Path
) -> None:
    env = environment(tmp_path / "home", standin)
    assert run(["chat"], b"remember the milk\n", env, tmp_path).returncode == 0
    database = tmp_path / "home" / "clawbot.db"
    damage(database, "messages")

    result = run(["chat"], b"hello\nare you there?\nanyone?\n", env, tmp_path)

    assert_refused_as_damaged(result, database)
    assert len(standin.requests) == 1  # only the first chat's message reached the model


def test_run_on_a_damaged_database_exits_1_with_one_line_before_connecting(
    standin: OpenAIStandin, tmp_path: Path
) -> None:
    env = environment(tmp_path / "home", standin)
    assert run(["chat"], b"remember the milk\n", env, tmp_path).returncode == 0
    database = tmp_path / "home" / "clawbot.db"
    damage(database, "turn_jobs")
    env.update(  # nothing listens on port 9: a bot that got as far as connecting would fail
        CLAWBOT_TELEGRAM_TOKEN="123456789:AAHstandinTOKENxxxxxxxxxxxxxxxxxxxx_",
        CLAWBOT_TELEGRAM_API_BASE="http://127.0.0.1:9/bot",
    )

    result = run(["run"], b"", env, tmp_path)

    assert_refused_as_damaged(result, database)
