"""Several clawbot processes on one PostgreSQL database: each session's turns run in one
process, its owner; a message another process takes in is answered there, once; a steer or
``/stop`` reaches a turn running elsewhere; a dead owner's sessions are taken over.

Two bots in one test process stand for two processes: each opens its own store (its own
connection and owner id), its own scheduler and its own channel."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pydantic import SecretStr

from clawbot.app import Clawbot
from clawbot.cli.chat_intake import ChatIntake
from clawbot.messages import InboundMessage, TextBlock, TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.scheduling.backlog import BacklogItem
from clawbot.scheduling.jobs import TurnJob
from clawbot.settings import Settings
from clawbot.store import new_id
from clawbot.subagents.records import ANNOUNCE_META
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel, call
from clawbot.tools.registry import ToolRegistry, make_tool

from .conftest import add_agent
from .postgres_server import PostgresServer

DEAD = "a-machine-gone:4242:deadbeef"


class Steps:
    """A ``step`` tool; step 2 waits until released, so a turn can be caught mid-loop."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.go_on = asyncio.Event()
        self.ran: list[int] = []

    def registry(self) -> ToolRegistry:
        async def step(n: int) -> str:
            """Do one step of the long task."""
            self.ran.append(n)
            if n == 2:
                self.entered.set()
                await self.go_on.wait()
            return f"step {n} done"

        return ToolRegistry([make_tool(step)])


class Pair:
    def __init__(self, url: str, first: Clawbot, second: Clawbot) -> None:
        self.url = url
        self.first = first
        self.second = second

    @staticmethod
    def channel(bot: Clawbot) -> MemoryChannel:
        adapter = bot.outbox.adapter("memory")
        assert isinstance(adapter, MemoryChannel)
        return adapter

    def sql(self, statement: str, *params: object) -> list[tuple[object, ...]]:
        with psycopg.connect(self.url, autocommit=True) as conn:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description else []


def bot_settings(tmp_path: Path, name: str, url: str, scripted: ScriptedModel) -> Settings:
    return Settings(
        home=tmp_path / name,
        model=scripted.model_string,
        database_url=SecretStr(url),
        retry_backoff=0,
        _env_file=None,  # type: ignore[call-arg]
    )


@pytest.fixture
def steps() -> Steps:
    return Steps()


@pytest.fixture
async def pair(
    tmp_path: Path, postgres_server: PostgresServer, scripted: ScriptedModel, steps: Steps
) -> AsyncIterator[Pair]:
    url = postgres_server.new_database(migrated=True)
    first = await Clawbot.open(bot_settings(tmp_path, "a", url, scripted), tools=steps.registry())
    second = await Clawbot.open(bot_settings(tmp_path, "b", url, scripted), tools=steps.registry())
    first.connect(MemoryChannel())
    second.connect(MemoryChannel())
    await first.scheduler.start()
    await second.scheduler.start()
    try:
        yield Pair(url, first, second)
    finally:
        steps.go_on.set()
        await second.close()
        await first.close()


def message(text: str, chat_id: str = "chat1", **fields: Any) -> InboundMessage:
    return MemoryChannel().message(text, chat_id=chat_id, **fields)


async def test_a_message_another_process_takes_in_is_answered_once_by_the_sessions_owner(
    pair: Pair, scripted: ScriptedModel
) -> None:
    scripted.add("Hello!", "Second answer.")
    await (await pair.first.router.receive(message("hi"))).wait()
    await pair.first.scheduler.wait_idle()

    await pair.second.router.receive(message("and again"))
    owner = pair.channel(pair.first)
    await owner.shows(lambda channel: len(channel.texts) == 2)

    assert owner.texts == ["Hello!", "Second answer."]
    assert pair.channel(pair.second).texts == []
    assert [request.last_user_text for request in scripted.requests] == ["hi", "and again"]


async def test_a_handed_over_message_runs_as_itself_not_as_a_backlog_summary(
    pair: Pair, scripted: ScriptedModel
) -> None:
    await (await pair.first.router.receive(message("hi"))).wait()
    await pair.first.scheduler.wait_idle()

    await pair.second.router.receive(message("what is the time?"))
    await pair.channel(pair.first).shows(lambda channel: len(channel.texts) == 2)

    assert scripted.requests[-1].last_user_text == "what is the time?"


async def test_the_first_process_to_take_a_message_for_a_session_owns_it(
    pair: Pair, scripted: ScriptedModel
) -> None:
    await (await pair.second.router.receive(message("hi", chat_id="chat2"))).wait()

    owners = pair.sql("SELECT owner FROM session_owners")
    assert owners == [(pair.second.store.owner,)]
    assert pair.channel(pair.second).texts == ["ok"]


async def test_messages_to_one_session_from_both_processes_never_run_two_turns_at_once(
    pair: Pair, tmp_path: Path
) -> None:
    in_flight: set[str] = set()
    overlaps: list[str] = []

    async def answer(request: ModelRequest) -> str:
        text = " ".join(_new_user_texts(request))
        chat = re.findall(r"\bc\d\b", text)[0]
        if chat in in_flight:
            overlaps.append(text)
        in_flight.add(chat)
        await asyncio.sleep(0.005)  # the model's latency: a window for a second turn
        in_flight.discard(chat)
        return f"answered {text}"

    model = ScriptedModel(name="test", function=answer)
    with model.installed():
        for n in range(6):
            for chat in ("c1", "c2", "c3"):
                bot = pair.first if n % 2 == 0 else pair.second
                await bot.router.receive(message(f"{chat} message {n}", chat_id=chat))
        # Each chat's first message went to the first bot: it owns all three and answers.
        owner = pair.channel(pair.first)
        await owner.shows(lambda channel: _covered(channel.texts) >= 18)
        await pair.first.scheduler.wait_idle()

    assert overlaps == []
    assert _covered(owner.texts) == 18
    assert pair.channel(pair.second).texts == []


def _covered(replies: list[str]) -> int:
    """How many messages the replies answer (a turn may answer several waiting ones)."""
    return sum(len(re.findall(r"\bc\d message \d\b", reply)) for reply in replies)


def _new_user_texts(request: ModelRequest) -> list[str]:
    """The user messages a request asks about: those after the last answer."""
    texts: list[str] = []
    for entry in reversed(request.messages):
        if entry["role"] == "assistant":
            break
        if entry["role"] == "user":
            texts.append(str(entry["content"]))
    return texts[::-1]


async def test_a_message_another_process_takes_in_steers_the_owners_running_turn(
    pair: Pair, scripted: ScriptedModel, steps: Steps
) -> None:
    scripted.add(
        call("step", n=1),
        call("step", n=2),
        "It is noon.",
        call("step", n=3),
        "All three steps are done.",
    )
    first = await pair.first.router.receive(message("do the three steps"))
    await steps.entered.wait()

    await pair.second.router.receive(message("what time is it?"))
    await _steered(pair)
    steps.go_on.set()
    await first.wait()
    await pair.channel(pair.first).shows(lambda channel: len(channel.texts) == 2)

    assert pair.channel(pair.first).texts == ["It is noon.", "All three steps are done."]
    assert steps.ran == [1, 2, 3]


async def _steered(pair: Pair) -> None:
    """Wait until the handed-over message waits in the owner's backlog, steering its turn."""
    (row,) = pair.sql("SELECT session_key FROM session_owners")
    key = str(row[0])
    while not pair.first.scheduler.queue_state(key).backlog:
        await asyncio.sleep(0)  # the owner hears the notice on its own connection


async def test_stop_asked_in_another_process_stops_the_owners_running_turn(
    pair: Pair, scripted: ScriptedModel, steps: Steps
) -> None:
    scripted.add(call("step", n=1), call("step", n=2), "never said")
    running = await pair.first.router.receive(message("do the steps"))
    await steps.entered.wait()

    answer = await (await pair.second.router.receive(message("/stop"))).wait()
    outcome = await running.wait()

    assert answer.reply == "Asked the clawbot process running this conversation to stop its turn."
    assert outcome.kind == "cancelled"
    assert "never said" not in pair.channel(pair.first).texts


async def test_a_platform_message_delivered_to_both_processes_is_answered_once(
    pair: Pair, scripted: ScriptedModel
) -> None:
    await (await pair.first.router.receive(message("hi", message_id="m1"))).wait()

    again = await pair.second.router.receive(message("hi", message_id="m1"))

    assert (await again.wait()).kind == "duplicate"
    assert pair.channel(pair.first).texts == ["ok"]
    assert len(scripted.requests) == 1


async def _dead_owner_with_a_waiting_message(pair: Pair, text: str) -> Session:
    """A session whose owner died after storing a message it had not answered yet."""
    session = await pair.second.router.session_for(message("hello"))
    pair.sql(
        "INSERT INTO clawbot_processes (owner, alive_until) VALUES (%s, now() - interval '1 s')",
        DEAD,
    )
    pair.sql("INSERT INTO session_owners (session_key, owner) VALUES (%s, %s)", session.key, DEAD)
    job = TurnJob(id=new_id("turn"), session_key=session.key, lane="main")
    entry = TranscriptEntry(role="user", content=(TextBlock(text=text),), turn_id=job.id)
    item = BacklogItem(kind="message", job_id=job.id, lane="main", entry=entry, steers=True)
    await pair.second.store.jobs.submit(session, job, item=item)
    return session


async def test_a_dead_owners_sessions_and_their_waiting_messages_are_taken_over(
    pair: Pair, scripted: ScriptedModel
) -> None:
    session = await _dead_owner_with_a_waiting_message(pair, "are you there?")

    await pair.first.scheduler.tick()
    await pair.channel(pair.first).shows(lambda channel: channel.texts == ["ok"])

    assert pair.sql("SELECT owner FROM session_owners WHERE session_key = %s", session.key) == [
        (pair.first.store.owner,)
    ]
    assert scripted.requests[0].last_user_text == "are you there?"


async def test_a_message_for_a_dead_owners_session_takes_it_over_with_its_waiting_work(
    pair: Pair, scripted: ScriptedModel
) -> None:
    await _dead_owner_with_a_waiting_message(pair, "first question")

    await pair.second.router.receive(message("second question"))
    await pair.channel(pair.second).shows(lambda channel: len(channel.texts) >= 1)
    await pair.second.scheduler.wait_idle()

    asked = [request.last_user_text for request in scripted.requests]
    assert "first question" in asked[0]
    assert any("second question" in text for text in asked)
    assert pair.channel(pair.first).texts == []


class Crashed:
    """A turn-end hook that does nothing: the process died right after a child's turn was
    stored, before its announce was written."""

    async def turn_ended(self, session: Session, job_id: str) -> None:
        return None

    async def recover(self) -> None:
        return None


async def test_a_childs_unreported_end_is_announced_once_when_two_processes_start_at_once(
    tmp_path: Path, postgres_server: PostgresServer, scripted: ScriptedModel
) -> None:
    url = postgres_server.new_database(migrated=True)
    worker = ScriptedModel(name="worker", default_text="The answer is 42.")
    with worker.installed():
        scripted.add(call("sessions_spawn", task="find it", agent="worker"), "Started.")
        async with await Clawbot.open(bot_settings(tmp_path, "a", url, scripted)) as crashed:
            crashed.connect(MemoryChannel())
            await add_agent(crashed, "worker", model=worker.model_string)
            crashed.scheduler.bind_turn_ends(Crashed())
            await crashed.router.handle(message("go"))
            await crashed.scheduler.wait_idle()
        scripted.add("The worker found 42.")

        bots = [await Clawbot.open(bot_settings(tmp_path, name, url, scripted)) for name in "bc"]
        channels = [MemoryChannel(), MemoryChannel()]
        try:
            for bot, channel in zip(bots, channels, strict=True):
                bot.connect(channel)
            await asyncio.gather(*(bot.start() for bot in bots))
            await asyncio.wait_for(_one_reply(channels), timeout=30)
            for bot in bots:
                await bot.scheduler.wait_idle()
            stored = await bots[0].store.transcripts.load("memory:chat1", 0)
        finally:
            for bot in bots:
                await bot.close()

    assert [entry.text for entry in stored if ANNOUNCE_META in entry.meta] == [
        "[@agent:worker#worker] finish"
    ]
    assert sorted(channels[0].texts + channels[1].texts) == ["The worker found 42."]
    assert len(worker.requests) == 1


async def _one_reply(channels: list[MemoryChannel]) -> None:
    while not (channels[0].texts or channels[1].texts):
        waits = [
            asyncio.ensure_future(channel.shows(lambda c: bool(c.texts))) for channel in channels
        ]
        _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for wait in pending:
            wait.cancel()


async def test_a_process_whose_store_is_busy_still_renews_its_claim_on_its_own_connection(
    tmp_path: Path, postgres_server: PostgresServer, scripted: ScriptedModel
) -> None:
    url = postgres_server.new_database(migrated=True)
    settings = bot_settings(tmp_path, "a", url, scripted).model_copy(update={"job_lease": 0.6})
    async with await Clawbot.open(settings) as bot:
        bot.connect(MemoryChannel())
        await bot.scheduler.start()
        owner = bot.store.owner
        release = threading.Event()
        # The store's one connection is held (as by a long queue of turns' writes).
        busy = asyncio.ensure_future(
            bot.store.database.run(lambda _conn: release.wait(30))  # type: ignore[attr-defined]
        )
        try:
            before = _alive_until(url, owner)
            renewed = await asyncio.wait_for(_until_renewed(url, owner, before), timeout=10)
        finally:
            release.set()
            await busy

    assert renewed > before


def _alive_until(url: str, owner: str) -> datetime:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT alive_until FROM clawbot_processes WHERE owner = %s", (owner,)
        ).fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


async def _until_renewed(url: str, owner: str, before: datetime) -> datetime:
    while (after := await asyncio.to_thread(_alive_until, url, owner)) <= before:
        await asyncio.sleep(0.05)  # polls the database from outside: no other signal
    return after


async def test_a_process_whose_claim_lapsed_says_so_and_claims_its_sessions_again(
    pair: Pair, scripted: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    await (await pair.first.router.receive(message("hi"))).wait()
    expire(pair, pair.first)

    await pair.second.scheduler.tick()  # takes the first one's session over
    await pair.first.scheduler.tick()
    await pair.first.router.receive(message("again"))
    await pair.channel(pair.second).shows(lambda channel: channel.texts == ["ok"])

    assert "did not renew its claim in time" in caplog.text
    assert pair.channel(pair.first).texts == ["ok"]


def user_texts(request: ModelRequest) -> list[str]:
    return [str(m["content"]) for m in request.messages if m["role"] == "user"]


def expire(pair: Pair, bot: Clawbot) -> None:
    """``bot``'s claim to be alive runs out (as if it stopped, or paused for too long)."""
    pair.sql(
        "UPDATE clawbot_processes SET alive_until = now() - interval '1 s' WHERE owner = %s",
        bot.store.owner,
    )


async def test_a_session_taken_back_in_a_round_shows_the_model_the_turns_run_elsewhere(
    pair: Pair, scripted: ScriptedModel
) -> None:
    await (await pair.first.router.receive(message("hi"))).wait()
    expire(pair, pair.first)
    await pair.second.scheduler.tick()  # takes the session over
    await (await pair.second.router.receive(message("while you were away"))).wait()
    expire(pair, pair.second)

    await pair.first.scheduler.tick()  # takes it back from the dead second one
    await (await pair.first.router.receive(message("and now?"))).wait()

    assert user_texts(scripted.requests[-1]) == ["hi", "while you were away", "and now?"]


async def test_a_session_taken_back_by_a_message_shows_the_model_the_turns_run_elsewhere(
    pair: Pair, scripted: ScriptedModel
) -> None:
    await (await pair.first.router.receive(message("hi"))).wait()
    expire(pair, pair.first)
    await pair.second.scheduler.tick()
    await (await pair.second.router.receive(message("while you were away"))).wait()
    await pair.first.scheduler.tick()  # its claim lapsed: it claims each session again
    expire(pair, pair.second)

    await (await pair.first.router.receive(message("and now?"))).wait()

    assert user_texts(scripted.requests[-1]) == ["hi", "while you were away", "and now?"]


async def test_a_chat_one_process_opened_and_another_ran_is_read_afresh_when_taken_over(
    pair: Pair, scripted: ScriptedModel
) -> None:
    await pair.first.router.receive(message("/help"))  # the session made here, nothing said
    await (await pair.second.router.receive(message("hi"))).wait()  # the second owns it
    expire(pair, pair.second)

    await pair.first.scheduler.tick()
    await (await pair.first.router.receive(message("still there?"))).wait()

    assert user_texts(scripted.requests[-1]) == ["hi", "still there?"]


async def test_a_chat_typed_where_another_process_runs_it_says_where_the_answer_appears(
    pair: Pair, scripted: ScriptedModel
) -> None:
    await (await pair.first.router.receive(message("hi"))).wait()

    await ChatIntake(pair.second.router)(message("and again"))
    await pair.channel(pair.first).shows(lambda channel: len(channel.texts) == 2)

    (notice,) = pair.channel(pair.second).texts
    assert notice.startswith(f"Another clawbot process ({pair.first.store.owner}) runs this")
    assert "its answer appears there" in notice
    assert pair.channel(pair.first).texts == ["ok", "ok"]
