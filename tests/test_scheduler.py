"""Scheduling: one turn per session, lanes, steer-backlog, /queue and /stop, deadlines."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from clawbot.app import Clawbot
from clawbot.clock import ManualClock
from clawbot.errors import StoreError
from clawbot.messages import TextBlock, TranscriptEntry
from clawbot.runtime.llm import trusted_text
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel, call
from clawbot.tools.files import file_tools
from clawbot.tools.registry import ToolRegistry, make_tool


class Steps:
    """A ``step`` tool for long tool loops; ``hold(n)`` makes step n wait until released."""

    def __init__(self) -> None:
        self.held: dict[int, asyncio.Event] = {}
        self.entered: dict[int, asyncio.Event] = {}
        self.ran: list[int] = []

    def hold(self, n: int) -> None:
        self.held[n] = asyncio.Event()
        self.entered[n] = asyncio.Event()

    def release(self, n: int) -> None:
        self.held[n].set()

    def registry(self) -> ToolRegistry:
        async def step(n: int) -> str:
            """Do one step of the long task."""
            self.ran.append(n)
            if n in self.held:
                self.entered[n].set()
                await self.held[n].wait()
            return f"step {n} done"

        return ToolRegistry([make_tool(step), *file_tools()])


@pytest.fixture
def steps() -> Steps:
    return Steps()


@pytest.fixture
async def stepbot(settings: Settings, steps: Steps) -> AsyncIterator[Clawbot]:
    async with await Clawbot.open(settings, tools=steps.registry()) as opened:
        opened.connect(MemoryChannel())
        yield opened


def sent(bot: Clawbot) -> list[str]:
    adapter = bot.outbox.adapter("memory")
    assert isinstance(adapter, MemoryChannel)
    return adapter.texts


def message(text: str, chat_id: str = "chat1", **fields: Any) -> Any:
    return MemoryChannel().message(text, chat_id=chat_id, **fields)


def conversation(request: ModelRequest) -> list[tuple[str, str]]:
    """The request's non-system messages as (role, text); tool calls as name(arguments),
    tool outputs as the tools returned them (without the untrusted-data mark)."""
    out = []
    for m in request.messages:
        if m["role"] == "system":
            continue
        if m.get("tool_calls"):
            calls = ", ".join(
                f"{c['function']['name']}({c['function']['arguments']})" for c in m["tool_calls"]
            )
            out.append((m["role"], calls))
        elif m["role"] == "tool":
            out.append((m["role"], trusted_text(str(m["content"]))))
        else:
            out.append((m["role"], m["content"]))
    return out


# steer-backlog ---------------------------------------------------------------------------


async def test_a_new_message_steers_a_long_tool_loop_which_then_resumes_from_the_backlog(
    stepbot: Clawbot, steps: Steps, scripted: ScriptedModel
) -> None:
    steps.hold(2)
    scripted.add(
        call("step", n=1),
        call("step", n=2),
        "It is noon.",
        call("step", n=3),
        "All three steps are done.",
    )
    first = await stepbot.router.receive(message("do the three steps"))
    await steps.entered[2].wait()

    second = await stepbot.router.receive(message("what time is it?"))
    steps.release(2)
    answered = await second.wait()
    resumed = await first.wait()

    assert (answered.reply, resumed.reply) == ("It is noon.", "All three steps are done.")
    assert sent(stepbot) == ["It is noon.", "All three steps are done."]
    assert steps.ran == [1, 2, 3]
    tool_loop = [
        ("user", "do the three steps"),
        ("assistant", 'step({"n": 1})'),
        ("tool", "step 1 done"),
        ("assistant", 'step({"n": 2})'),
        ("tool", "step 2 done"),
    ]
    assert conversation(scripted.requests[2]) == [*tool_loop, ("user", "what time is it?")]
    assert conversation(scripted.requests[3]) == [
        *tool_loop,
        ("user", "what time is it?"),
        ("assistant", "It is noon."),
        (
            "user",
            "[Backlog]\n"
            "Interrupted work to resume:\n"
            "1. Resume the task you were working on when a newer message interrupted you: "
            '"do the three steps"\n'
            "Tool calls already made (full results are earlier in this chat):\n"
            '- step({"n": 1}) -> step 1 done\n'
            '- step({"n": 2}) -> step 2 done\n'
            "Continue from where you stopped.",
        ),
    ]


async def test_tool_calls_not_yet_started_are_interrupted_and_still_get_a_result(
    stepbot: Clawbot, steps: Steps, scripted: ScriptedModel
) -> None:
    steps.hold(1)
    scripted.add([call("step", n=1), call("step", n=2)], "Hello!", "Finished the steps.")
    first = await stepbot.router.receive(message("do two steps at once"))
    await steps.entered[1].wait()

    second = await stepbot.router.receive(message("hi"))
    steps.release(1)
    await second.wait()
    await first.wait()

    assert steps.ran == [1]
    assert scripted.requests[1].tool_results == [
        "step 1 done",
        "not run: interrupted by a newer message; resumes from the backlog",
    ]
    assert scripted.requests[1].last_user_text == "hi"
    resume = scripted.requests[2].last_user_text
    assert '- step({"n": 2}) -> not run: interrupted by a newer message' in resume
    assert sent(stepbot) == ["Hello!", "Finished the steps."]


async def test_a_message_during_one_long_model_call_waits_in_the_backlog(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def answer(request: ModelRequest) -> str:
        if len(scripted.requests) == 1:
            entered.set()
            await release.wait()
            return "Here is the long answer."
        return "And the quick one."

    scripted.function = answer
    first = await bot.router.receive(channel.message("write a long answer"))
    await entered.wait()

    second = await bot.router.receive(channel.message("and a quick one"))
    assert len(scripted.requests) == 1
    release.set()
    await first.wait()
    await second.wait()

    assert channel.texts == ["Here is the long answer.", "And the quick one."]
    assert conversation(scripted.requests[1]) == [
        ("user", "write a long answer"),
        ("assistant", "Here is the long answer."),
        (
            "user",
            "[Backlog]\nMessages that arrived while you were busy, oldest first:\n"
            "1. and a quick one",
        ),
    ]


async def test_messages_merged_into_one_backlog_turn_share_its_reply(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def answer(request: ModelRequest) -> str:
        if len(scripted.requests) == 1:
            entered.set()
            await release.wait()
        return f"answer {len(scripted.requests)}"

    scripted.function = answer
    first = await bot.router.receive(channel.message("one"))
    await entered.wait()
    later = [await bot.router.receive(channel.message(text)) for text in ("two", "three")]
    release.set()

    outcomes = [await r.wait() for r in (first, *later)]

    assert [o.reply for o in outcomes] == ["answer 1", "answer 2", "answer 2"]
    assert channel.texts == ["answer 1", "answer 2"]
    assert scripted.requests[1].last_user_text.endswith("1. two\n2. three")
    jobs = await bot.store.jobs.for_session("memory:chat1")
    assert [j.status for j in jobs] == ["done", "done", "done"]


async def test_internal_announce_traffic_waits_in_the_backlog_and_never_steers(
    stepbot: Clawbot, steps: Steps, scripted: ScriptedModel
) -> None:
    steps.hold(1)
    scripted.add(call("step", n=1), call("step", n=2), "Steps done.", "Noted the report.")
    first = await stepbot.router.receive(message("do the steps"))
    await steps.entered[1].wait()
    session = await stepbot.router.session_for(message("x"))
    announce = TranscriptEntry(role="user", content=(TextBlock(text="[@worker] finished"),))

    handle = await stepbot.scheduler.submit(session, announce, lane="announce")
    steps.release(1)
    await first.wait()
    assert handle is not None
    await handle.outcome()

    assert steps.ran == [1, 2]
    assert [r.last_user_text for r in scripted.requests[:3]] == ["do the steps"] * 3
    assert scripted.requests[3].last_user_text == (
        "[Backlog]\nMessages that arrived while you were busy, oldest first:\n1. [@worker] finished"
    )


# one turn per session, lanes ---------------------------------------------------------------


class Concurrency:
    """Measures concurrent model calls per session and overall; the first ``hold`` calls
    wait until all of them are in, proving they overlap (and, without ``auto_release``,
    until the test calls ``release.set()``)."""

    def __init__(self, scripted: ScriptedModel, hold: int, *, auto_release: bool = True) -> None:
        self.active: Counter[str] = Counter()
        self.max_per_session = 0
        self.max_total = 0
        self.hold = hold
        self.all_in = asyncio.Event()
        self.release = self.all_in if auto_release else asyncio.Event()
        scripted.function = self.answer

    async def answer(self, request: ModelRequest) -> str:
        session = request.last_user_text.split("-")[0].split()[-1]
        self.active[session] += 1
        total = sum(self.active.values())
        self.max_per_session = max(self.max_per_session, self.active[session])
        self.max_total = max(self.max_total, total)
        if total >= self.hold:
            self.all_in.set()
        try:
            if not self.release.is_set():
                await asyncio.wait_for(self.release.wait(), 10)
            return f"answered {session}"
        finally:
            self.active[session] -= 1


async def test_messages_arriving_together_never_run_concurrently_in_one_session_but_do_across(
    bot: Clawbot, scripted: ScriptedModel
) -> None:
    measure = Concurrency(scripted, hold=3)
    messages = [message(f"s{n}-{part}", chat_id=f"c{n}") for n in (1, 2, 3) for part in "ab"]

    results = await asyncio.gather(*(bot.router.handle(m) for m in messages))

    assert measure.max_per_session == 1
    assert measure.max_total == 3
    assert all(r.kind == "turn" and r.reply for r in results)


async def test_a_session_never_runs_two_turns_even_across_lanes(
    bot: Clawbot, scripted: ScriptedModel
) -> None:
    measure = Concurrency(scripted, hold=2)
    session = await bot.router.session_for(message("x"))
    entries = [
        TranscriptEntry(role="user", content=(TextBlock(text=f"s1-{lane}"),))
        for lane in ("subagent", "cron", "announce")
    ]

    handles = [
        await bot.scheduler.submit(session, entry, lane=lane)  # type: ignore[arg-type]
        for entry, lane in zip(entries, ("subagent", "cron", "announce"), strict=True)
    ]
    handles.append(await bot.scheduler.submit(session, entries[0].model_copy(), lane="main"))
    other = await bot.router.receive(message("s2-a", chat_id="c2"))
    await asyncio.gather(*(h.outcome() for h in handles if h is not None), other.wait())

    assert measure.max_per_session == 1
    assert measure.max_total == 2


async def test_a_lanes_limit_caps_its_concurrent_turns_and_the_rest_wait_for_a_slot(
    settings: Settings, scripted: ScriptedModel
) -> None:
    measure = Concurrency(scripted, hold=2, auto_release=False)
    async with await Clawbot.open(settings.model_copy(update={"lane_main": 2})) as bot:
        bot.connect(MemoryChannel())
        receipts = [await bot.router.receive(message(f"s{n}-a", chat_id=f"c{n}")) for n in range(4)]
        await measure.all_in.wait()

        waiting = bot.scheduler.queue_state("memory:c3")
        assert (waiting.active, waiting.queued, waiting.waiting_lane) == (None, 1, "main")
        measure.release.set()
        outcomes = [await r.wait() for r in receipts]

    assert measure.max_total == 2
    assert [o.reply for o in outcomes] == [f"answered s{n}" for n in range(4)]


async def test_the_global_limit_caps_turns_across_lanes(
    settings: Settings, scripted: ScriptedModel
) -> None:
    measure = Concurrency(scripted, hold=1)
    async with await Clawbot.open(settings.model_copy(update={"max_active_turns": 1})) as bot:
        bot.connect(MemoryChannel())
        first = await bot.router.receive(message("s0-a", chat_id="c0"))
        session = await bot.router.session_for(message("x", chat_id="c1"))
        entry = TranscriptEntry(role="user", content=(TextBlock(text="s1-a"),))
        second = await bot.scheduler.submit(session, entry, lane="subagent")
        assert second is not None
        await first.wait()
        await second.outcome()

    assert measure.max_total == 1


# storing before processing ---------------------------------------------------------------


async def test_receive_returns_once_the_message_is_stored_before_its_turn_runs(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def answer(request: ModelRequest) -> str:
        entered.set()
        await release.wait()
        return "done"

    scripted.function = answer
    first = await bot.router.receive(channel.message("first"))
    await entered.wait()
    second = await bot.router.receive(channel.message("second"))

    stored = await bot.store.transcripts.load("memory:chat1", 0)
    backlog = await bot.store.backlog.items("memory:chat1")
    jobs = await bot.store.jobs.for_session("memory:chat1")
    release.set()
    await first.wait()
    await second.wait()

    assert [e.text for e in stored] == ["first"]
    assert [(stored.item.kind, stored.item.text) for stored in backlog] == [("message", "second")]
    assert [j.status for j in jobs] == ["running", "queued"]


async def test_a_redelivered_message_is_dropped_while_its_session_is_busy(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def answer(request: ModelRequest) -> str:
        entered.set()
        await release.wait()
        return "ok"

    scripted.function = answer
    first = await bot.router.receive(channel.message("hello", message_id="m1"))
    await entered.wait()
    queued = await bot.router.receive(channel.message("more", message_id="m2"))

    again = [
        await bot.router.receive(channel.message(text, message_id=mid))
        for text, mid in (("hello", "m1"), ("more", "m2"))
    ]
    release.set()
    await first.wait()
    await queued.wait()

    assert [(await r.wait()).kind for r in again] == ["duplicate", "duplicate"]
    assert len(scripted.requests) == 2
    assert len(await bot.store.jobs.for_session("memory:chat1")) == 2


@pytest.mark.parametrize("chatter", [False, True], ids=["a message", "a group's chatter"])
async def test_a_message_whose_sender_stops_waiting_midway_is_still_taken_in_whole(
    bot: Clawbot,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    monkeypatch: pytest.MonkeyPatch,
    chatter: bool,
) -> None:
    """Its sender cancelled while it was being stored (a subagent stopped as it announced,
    say), a message the database took is queued all the same, and the session's next
    message, which waited for it, gets its turn: before, the one sat in the database unseen
    and the other waited for good."""
    held = {"first": asyncio.Event(), "cut short": asyncio.Event()}
    writing = {text: asyncio.Event() for text in held}

    def holding(write: Any) -> Any:
        async def held_back(session: Any, *args: Any, **kwargs: Any) -> Any:
            item = kwargs.get("item")
            entry = item.entry if item is not None else kwargs.get("entry") or args[0]
            if entry.text in held:
                writing[entry.text].set()
                await held[entry.text].wait()
            return await write(session, *args, **kwargs)

        return held_back

    monkeypatch.setattr(bot.store.jobs, "submit", holding(bot.store.jobs.submit))
    defer = holding(bot.store.backlog.defer_context)
    monkeypatch.setattr(bot.store.backlog, "defer_context", defer)
    scripted.add("First done.", "Next done.")
    first = asyncio.ensure_future(bot.router.receive(channel.message("first")))
    await writing["first"].wait()
    cut_short: asyncio.Future[Any]
    if chatter:  # what a group says without addressing the bot: kept as context
        said = TranscriptEntry(role="user", content=(TextBlock(text="cut short"),))
        session = await bot.router.session_for(channel.message("cut short"))
        cut_short = asyncio.ensure_future(bot.scheduler.add_context(session, said))
    else:
        cut_short = asyncio.ensure_future(bot.router.receive(channel.message("cut short")))
    await writing["cut short"].wait()
    third = await bot.router.receive(channel.message("third"))
    held["first"].set()
    await (await first).wait()
    cut_short.cancel()
    held["cut short"].set()

    answered = await asyncio.wait_for(third.wait(), timeout=30)

    assert cut_short.cancelled()
    assert answered.reply == "Next done."
    assert channel.texts == ["First done.", "Next done."]
    seen = [m["content"] for m in scripted.requests[1].messages if m["role"] == "user"]
    assert "cut short" in seen[-1 if not chatter else -2] and "third" in seen[-1]
    assert {job.status for job in await bot.store.jobs.for_session("memory:chat1")} == {"done"}


async def test_a_message_the_database_refuses_leaves_the_next_one_its_turn(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    submit = bot.store.jobs.submit
    writing, refuse = asyncio.Event(), asyncio.Event()

    async def refusing(session: Any, job: Any, **kwargs: Any) -> bool:
        if kwargs["item"] is not None and kwargs["item"].entry.text == "refused":
            writing.set()
            await refuse.wait()
            raise StoreError("disk I/O error")
        return await submit(session, job, **kwargs)

    monkeypatch.setattr(bot.store.jobs, "submit", refusing)
    entered, release = asyncio.Event(), asyncio.Event()

    async def answer(request: ModelRequest) -> str:
        entered.set()
        await release.wait()
        return f"Answered {request.last_user_text.splitlines()[-1]}"

    scripted.function = answer
    first = await bot.router.receive(channel.message("first"))
    await entered.wait()
    refused = asyncio.ensure_future(bot.router.receive(channel.message("refused")))
    await writing.wait()
    third = await bot.router.receive(channel.message("third"))
    release.set()
    await first.wait()
    refuse.set()
    await refused

    answered = await asyncio.wait_for(third.wait(), timeout=30)

    assert answered.reply == "Answered 1. third"
    assert channel.texts[0] == "Answered first"
    assert channel.texts[1].startswith("Sorry, that failed: disk I/O error")


# /queue and /stop --------------------------------------------------------------------------


async def test_queue_shows_the_active_turn_its_lane_and_the_backlog(
    settings: Settings, scripted: ScriptedModel
) -> None:
    clock = ManualClock()
    entered, release = asyncio.Event(), asyncio.Event()

    async def answer(request: ModelRequest) -> str:
        entered.set()
        await release.wait()
        return "ok"

    scripted.function = answer
    async with await Clawbot.open(settings, clock=clock) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        first = await bot.router.receive(channel.message("write the report"))
        await entered.wait()
        second = await bot.router.receive(channel.message("also check the mail"))
        clock.advance(12)

        shown = await bot.router.handle(channel.message("/queue"))
        release.set()
        await first.wait()
        await second.wait()
        idle = await bot.router.handle(channel.message("/queue"))

    assert first.job is not None
    assert shown.reply == (
        f"Running: a turn in the main lane for 12 s (job {first.job.job_id}).\n"
        "Backlog (1):\n"
        "1. message: also check the mail — runs at the next tool boundary"
    )
    assert idle.reply == "Nothing is running in this conversation and nothing is waiting."


async def test_stop_cancels_the_running_turn_at_once_and_says_so(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    entered = asyncio.Event()

    async def answer(request: ModelRequest) -> str:
        if request.last_user_text == "loop forever":
            entered.set()
            await asyncio.Event().wait()
        return "Back to normal."

    scripted.function = answer
    running = await bot.router.receive(channel.message("loop forever"))
    await entered.wait()

    stopped = await bot.router.handle(channel.message("/stop"))
    outcome = await running.wait()
    after = await bot.router.handle(channel.message("hello again"))

    assert stopped.reply == "Stopped the running turn."
    assert outcome.kind == "cancelled"
    assert after.reply == "Back to normal."
    assert channel.texts == ["Stopped the running turn.", "Back to normal."]
    jobs = await bot.store.jobs.for_session("memory:chat1")
    assert [(j.status, j.error) for j in jobs] == [
        ("cancelled", "stopped by /stop"),
        ("done", None),
    ]


async def test_stop_right_after_a_message_stops_its_turn_and_the_session_goes_on(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    """``/stop`` taken in the same moment as the message before it (``clawbot chat`` reading
    both from a pipe): the turn, launched but not started yet, ends as stopped."""
    scripted.add("Too late.")
    running = await bot.router.receive(channel.message("take your time"))

    stopped = await bot.router.handle(channel.message("/stop"))
    async with asyncio.timeout(30):
        outcome = await running.wait()
    after = await bot.router.handle(channel.message("hello again"))

    assert stopped.reply == "Stopped the running turn."
    assert outcome.kind == "cancelled"
    assert after.reply == "Too late."  # the stopped turn never asked the model
    assert len(scripted.requests) == 1


async def test_stop_also_drops_interrupted_work_but_waiting_messages_are_answered(
    stepbot: Clawbot, steps: Steps, scripted: ScriptedModel
) -> None:
    steps.hold(1)
    steps.hold(9)
    scripted.add(call("step", n=1), call("step", n=9), "Answered the third.")
    first = await stepbot.router.receive(message("long task"))
    await steps.entered[1].wait()
    second = await stepbot.router.receive(message("second"))
    steps.release(1)
    await steps.entered[9].wait()  # the steered turn for "second" is running (held)
    third = await stepbot.router.receive(message("third"))

    stopped = await stepbot.router.handle(message("/stop"))
    outcomes = [await r.wait() for r in (first, second, third)]

    assert stopped.reply == (
        "Stopped the running turn. Dropped 1 interrupted task(s) waiting to resume. "
        "1 waiting message(s) will still be answered."
    )
    assert [o.kind for o in outcomes] == ["cancelled", "cancelled", "turn"]
    assert scripted.requests[-1].last_user_text == (
        "[Backlog]\nMessages that arrived while you were busy, oldest first:\n1. third"
    )


async def test_stop_with_nothing_running_says_so(chat: Any) -> None:
    result = await chat.say("/stop")

    assert result.reply == "Nothing was running."


# deadline --------------------------------------------------------------------------------


async def test_a_turn_past_its_deadline_is_cancelled_the_user_told_and_the_session_freed(
    settings: Settings, scripted: ScriptedModel
) -> None:
    async def answer(request: ModelRequest) -> str:
        if request.last_user_text == "take forever":
            await asyncio.Event().wait()
        return "Quick answer."

    scripted.function = answer
    async with await Clawbot.open(settings.model_copy(update={"turn_deadline": 0.2})) as bot:
        channel = MemoryChannel()
        bot.connect(channel)

        slow = await bot.router.handle(channel.message("take forever"))
        quick = await bot.router.handle(channel.message("something quick"))
        jobs = await bot.store.jobs.for_session("memory:chat1")

    assert slow.kind == "turn" and slow.reply is not None
    assert slow.reply.startswith(
        "Sorry, answering your message `take forever` took longer than 0.2 s (the turn deadline)"
    )
    assert quick.reply == "Quick answer."
    assert channel.texts == [slow.reply, "Quick answer."]
    assert [(j.status, j.error) for j in jobs] == [
        ("failed", "turn deadline of 0.2 s exceeded"),
        ("done", None),
    ]
