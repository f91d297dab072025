"""A child's report reaches its parent exactly once across crashes: at any point between the
child's end and the parent's turn, a restart delivers it once, never twice, never zero
times (in process here; a SIGKILLed ``clawbot chat`` in the subprocess test)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from clawbot.app import Clawbot
from clawbot.clock import ManualClock
from clawbot.routing.sessions import Session
from clawbot.settings import Settings
from clawbot.subagents.records import ANNOUNCE_META
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel, Step, call

from .conftest import add_agent, until_idle
from .standins.openai_api import OpenAIStandin
from .test_cli import chat_killed_when_the_model_hangs, environment, run
from .test_subagents import BLOCK

PARENT = "memory:chat1"


@pytest.fixture
def worker() -> Iterator[ScriptedModel]:
    model = ScriptedModel(name="worker", default_text="The answer is 42.")
    with model.installed():
        yield model


class Crashed:
    """A turn-end hook that does nothing: the process died right after the child's turn
    was stored, before its announce was written."""

    async def turn_ended(self, session: Session, job_id: str) -> None:
        return None

    async def recover(self) -> None:
        return None


async def announces(bot: Clawbot) -> list[str]:
    stored = await bot.store.transcripts.load(PARENT, 0)
    return [e.text for e in stored if ANNOUNCE_META in e.meta]


async def test_a_crash_between_the_childs_end_and_its_announce_reports_it_once_at_restart(
    settings: Settings, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    scripted.add(call("sessions_spawn", task="find it", agent="worker"), "Started.")
    async with await Clawbot.open(settings) as crashed:
        first = MemoryChannel()
        crashed.connect(first)
        await add_agent(crashed, "worker", model=worker.model_string)
        crashed.scheduler.bind_turn_ends(Crashed())
        await crashed.router.handle(first.message("go"))
        await crashed.scheduler.wait_idle()
        assert len(worker.requests) == 1
        assert await announces(crashed) == []

    scripted.add("The worker found 42.")
    async with await Clawbot.open(settings) as restarted:
        second = MemoryChannel()
        restarted.connect(second)
        await restarted.start()
        await restarted.scheduler.wait_idle()
        assert await announces(restarted) == ["[@agent:worker#worker] finish"]

    async with await Clawbot.open(settings) as again:
        third = MemoryChannel()
        again.connect(third)
        await again.start()
        await again.scheduler.wait_idle()
        assert await announces(again) == ["[@agent:worker#worker] finish"]

    assert first.texts == ["Started."]
    assert second.texts == ["The worker found 42."]
    assert third.texts == []
    assert BLOCK in scripted.requests[-1].system
    assert len(worker.requests) == 1


async def test_a_crash_after_the_announce_was_written_runs_the_parents_turn_once(
    settings: Settings, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    clock = ManualClock()
    entered, release = asyncio.Event(), asyncio.Event()

    async def parent(request: ModelRequest) -> Step:
        if request.last_user_text == "go" and request.messages[-1]["role"] == "user":
            return call("sessions_spawn", task="find it", agent="worker")
        if request.messages[-1]["role"] == "tool":
            return "Started."
        if not entered.is_set():  # the first run of the announce turn: the process dies here
            entered.set()
            await release.wait()
            return "stale answer"
        return "The worker found 42."

    scripted.function = parent
    async with await Clawbot.open(settings, clock=clock) as crashed:
        lost = MemoryChannel()
        crashed.connect(lost)
        await add_agent(crashed, "worker", model=worker.model_string)

        async def answer(request: ModelRequest) -> Step:
            await until_idle(crashed, PARENT)  # the report starts a turn of its own
            return "The answer is 42."

        worker.function = answer
        await crashed.router.handle(lost.message("go"))
        await entered.wait()
        clock.advance(settings.job_lease + 1)
        async with await Clawbot.open(settings, clock=clock) as restarted:
            channel = MemoryChannel()
            restarted.connect(channel)
            await restarted.start()
            await restarted.scheduler.wait_idle()
            stored = await announces(restarted)
        release.set()
        await crashed.scheduler.wait_idle()

    assert stored == ["[@agent:worker#worker] finish"]
    assert channel.texts == ["The worker found 42."]
    assert lost.texts == ["Started."]  # the stale run's answer never went out
    assert BLOCK in scripted.requests[-1].system
    assert len(worker.requests) == 1


def test_a_process_killed_between_a_childs_end_and_its_report_reports_once_after_restart(
    standin: OpenAIStandin, tmp_path: Path
) -> None:
    # The parent spawns a copy of itself; the child answers; the parent's turn for the
    # child's report reaches the model and hangs there, and the process is SIGKILLed.
    standin.script = [
        {"tool_calls": [("sessions_spawn", {"task": "find the answer", "label": "research"})]},
        "Started a subagent.",
        {"hang": True},
    ]
    standin.routes["find the answer"] = ["The answer is 42."]
    env = environment(tmp_path / "home", standin)
    before = chat_killed_when_the_model_hangs(
        standin, env, tmp_path, b"research this\n", "the parent's turn for the report"
    )
    standin.script = ["The subagent says 42."]

    restarted = run(["chat"], b"", env, tmp_path)
    again = run(["chat"], b"", env, tmp_path)

    assert before == "Started a subagent.\n"
    assert restarted.returncode == 0, restarted.stderr.decode()
    assert restarted.stdout.decode() == "The subagent says 42.\n"
    assert again.returncode == 0 and again.stdout.decode() == ""
    last = standin.requests[-1]["messages"]
    blocks = [m for m in last if m["role"] == "system" and BLOCK in (m["content"] or "")]
    assert len(blocks) == 1 and "Result: The answer is 42." in blocks[0]["content"]
    finishes = [m for m in last if m["role"] == "user" and "] finish" in m["content"]]
    assert len(finishes) == 1 and finishes[0]["content"].count("] finish") == 1
    # Five model calls in all: spawn, its answer, the child, the hung report turn, the rerun.
    assert len(standin.requests) == 5
