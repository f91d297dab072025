"""Processes on one PostgreSQL database, against the Discord stand-in: one gateway session
per bot (shard 0 of 1), opened by the process that holds its leader lock; the others log in
over REST only and open the gateway when they take the lock over. A leader that loses its
lock closes its session (the stand-in counts the sessions open on the shard, as Discord
does), goes on sending, and opens a new session when it leads again."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest
from pydantic import SecretStr

from clawbot.app import Clawbot
from clawbot.cli.leadership import Leadership
from clawbot.cli.service import Service
from clawbot.errors import ConfigError
from clawbot.messages import InboundMessage, OutboundMessage
from clawbot.settings import Settings
from clawbot.store.postgres.leader import PostgresLeaderLock, lock_key
from clawbot.testing import ScriptedModel
from clawbot.testing.conformance import Held
from tests.postgres_server import PostgresServer
from tests.standins.discord import BOT_TOKEN, BOT_USER_ID, GENERAL_CHANNEL_ID, DiscordHarness
from tests.standins.openai_api import OpenAIStandin
from tests.test_cli import environment
from tests.test_leader_polling import RETRY, TIMEOUT, Process, until_waiting_for_a_lock

pytestmark = pytest.mark.usefixtures("spawned_processes")
GATEWAY = f"discord gateway bot {BOT_USER_ID} shard 0"


@pytest.fixture
def llm() -> Iterator[OpenAIStandin]:
    server = OpenAIStandin()
    with server.running():
        yield server


@pytest.fixture
async def discord() -> AsyncIterator[DiscordHarness]:
    harness = DiscordHarness()
    await harness.start()
    yield harness
    await harness.stop()


def bot_environment(
    home: Path, discord: DiscordHarness, llm: OpenAIStandin, database: str
) -> dict[str, str]:
    return environment(
        home,
        llm,
        CLAWBOT_DISCORD_TOKEN=BOT_TOKEN,
        CLAWBOT_DISCORD_API_BASE=discord.server.api_base,
        CLAWBOT_DM_POLICY="open",
        CLAWBOT_STREAMING="off",
        CLAWBOT_DATABASE_URL=database,
        CLAWBOT_LEADER_RETRY_SECONDS=RETRY,
    )


def replies(discord: DiscordHarness) -> list[str]:
    return [record.text for record in discord.sent()]


async def leader_and_sender(
    tmp_path: Path, discord: DiscordHarness, llm: OpenAIStandin, database: str
) -> tuple[Process, Process]:
    """Two ``clawbot run`` processes on one database: the first leads the gateway, the
    second (started once it does) sends only."""
    first = await Process.start(
        bot_environment(tmp_path / "one", discord, llm, database), tmp_path, "discord"
    )
    await first.wait_for_line(f"discord: this process leads {GATEWAY}")
    second = await Process.start(
        bot_environment(tmp_path / "two", discord, llm, database), tmp_path, "discord"
    )
    await second.wait_for_line(f"leads {GATEWAY}; this process sends only")
    return first, second


async def test_of_two_processes_one_opens_the_discord_gateway_and_the_other_takes_over_a_kill(
    tmp_path: Path, discord: DiscordHarness, llm: OpenAIStandin, postgres_server: PostgresServer
) -> None:
    database = postgres_server.new_database(migrated=True)
    server = discord.server
    first, second = await leader_and_sender(tmp_path, discord, llm, database)
    sessions_while_both_ran = len(server.identify_payloads)

    first.kill()
    await first.process.wait()
    await server.until(lambda: not server.connected.is_set(), TIMEOUT)  # the gateway noticed
    await second.wait_for_line(f"discord: this process took over {GATEWAY}")
    await server.until(lambda: len(server.identify_payloads) == 2, TIMEOUT)
    await server.until(lambda: server.connected.is_set(), TIMEOUT)
    await discord.inject_message("after the kill", sender_id="3001")
    try:
        await server.until(lambda: bool(replies(discord)), TIMEOUT)
    except TimeoutError:
        raise AssertionError(second.log) from None
    code = await second.terminate()

    assert sessions_while_both_ran == 1
    assert replies(discord) == ["echo: after the kill"]
    assert code == 0, second.log


# ---------------------------------------------------------------- the lock's connection lost

HELD_BY = f"""SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
 AND ((classid::bigint << 32) | objid::bigint) = {lock_key(GATEWAY)}"""
"""The backend holding the gateway's leader lock (``pg_locks`` shows the key in halves)."""


@pytest.fixture
def database(postgres_server: PostgresServer) -> str:
    return postgres_server.new_database(migrated=True)


@contextlib.asynccontextmanager
async def leading(
    settings: Settings, discord: DiscordHarness, database: str
) -> AsyncIterator[Leadership]:
    """One process (this one) serving Discord on the shared database, leading the gateway."""
    from adapters.discord.adapter import DiscordAdapter

    settings = settings.model_copy(
        update={"discord_token": SecretStr(BOT_TOKEN),
                "discord_api_base": discord.server.api_base,
                "dm_policy": "open", "leader_retry_seconds": 0.05}
    )  # fmt: skip
    async with await Clawbot.open(settings) as bot:
        service = Service(
            bot, [DiscordAdapter.from_settings(settings)], shutdown_timeout=5,
            leader_locks=lambda name: PostgresLeaderLock(database, name, "the leader"),
        )  # fmt: skip
        await service.start()
        try:
            leadership = service.leaderships[0]
            await asyncio.wait_for(leadership.leading.wait(), TIMEOUT)
            yield leadership
        finally:
            await service.stop()


@contextlib.asynccontextmanager
async def lock_taken_by_another(database: str) -> AsyncIterator[None]:
    """The database ends the leader's lock connection (a restart, a network cut) while
    another process queues for the lock, so it holds the lock from that instant until the
    block ends."""
    async with (
        await psycopg.AsyncConnection.connect(database, autocommit=True) as other,
        await psycopg.AsyncConnection.connect(database, autocommit=True) as admin,
    ):
        queued = asyncio.create_task(
            other.execute("SELECT pg_advisory_lock(%s)", (lock_key(GATEWAY),))
        )
        await until_waiting_for_a_lock(admin, other.info.backend_pid)
        await admin.execute(f"SELECT pg_terminate_backend(pid, 10000) FROM ({HELD_BY}) AS held")
        await asyncio.wait_for(queued, TIMEOUT)
        yield


async def test_a_leader_that_loses_its_lock_closes_its_gateway_session_yet_sends_the_reply(
    settings: Settings, scripted: ScriptedModel, discord: DiscordHarness, database: str
) -> None:
    server = discord.server
    held = Held(scripted)
    async with leading(settings, discord, database) as leadership:
        await discord.inject_message("a long question", sender_id="3002")
        await asyncio.wait_for(held.started.wait(), TIMEOUT)
        async with lock_taken_by_another(database):
            await asyncio.wait_for(leadership.waiting.wait(), TIMEOUT)
            await server.until(lambda: server.open_sessions() == 0, TIMEOUT)
            closed = len(server.session_counts)
            held.release.set()  # the turn that was running when the lock was lost ends
            await server.until(lambda: bool(replies(discord)), TIMEOUT)
            sessions_since = server.most_open_sessions(since=closed)
            sessions_opened = len(server.identify_payloads)

    assert replies(discord) == ["finished"]
    assert sessions_since == 0
    assert sessions_opened == 1


async def test_a_leader_that_takes_its_lock_back_opens_a_new_gateway_session_and_answers(
    settings: Settings, discord: DiscordHarness, database: str
) -> None:
    server = discord.server
    async with leading(settings, discord, database) as leadership:
        async with lock_taken_by_another(database):
            await asyncio.wait_for(leadership.waiting.wait(), TIMEOUT)
            await server.until(lambda: server.open_sessions() == 0, TIMEOUT)
        await asyncio.wait_for(leadership.leading.wait(), TIMEOUT)  # the lock is free again
        await server.until(lambda: server.open_sessions() == 1, TIMEOUT)
        await discord.inject_message("are you back?", sender_id="3003")
        await server.until(lambda: bool(replies(discord)), TIMEOUT)

    assert replies(discord) == ["ok"]
    assert len(server.identify_payloads) == 2


async def test_once_the_other_process_took_over_a_lost_lock_one_gateway_session_answers(
    tmp_path: Path, discord: DiscordHarness, llm: OpenAIStandin, database: str
) -> None:
    """The leader's lock connection is ended while the leader is frozen (SIGSTOP), so the
    other process, not the leader itself, takes the lock; the leader, thawed, finds its
    lock lost and must close its session: Discord would otherwise send every event to both."""
    server = discord.server
    first, second = await leader_and_sender(tmp_path, discord, llm, database)

    os.kill(first.process.pid, signal.SIGSTOP)
    try:
        async with await psycopg.AsyncConnection.connect(database, autocommit=True) as admin:
            await admin.execute(f"SELECT pg_terminate_backend(pid, 10000) FROM ({HELD_BY}) AS h")
        await second.wait_for_line(f"discord: this process took over {GATEWAY}")
    finally:
        os.kill(first.process.pid, signal.SIGCONT)
    await first.wait_for_line(f"discord: lost the lock of {GATEWAY}")
    try:
        await server.until(lambda: server.open_sessions() == 1, TIMEOUT)
    except TimeoutError:
        raise AssertionError(f"sessions open: {server.session_counts}\n{first.log}") from None
    took_over = len(server.session_counts)
    texts = [f"after the take-over {number}" for number in range(3)]
    for number, text in enumerate(texts):  # one chat each: each message a turn of its own
        await discord.inject_message(text, sender_id=f"300{4 + number}")
    try:
        await server.until(lambda: len(replies(discord)) >= len(texts), TIMEOUT)
    except TimeoutError:
        raise AssertionError(f"{replies(discord)}\n{first.log}\n{second.log}") from None
    most_sessions, sessions_opened = (
        server.most_open_sessions(since=took_over),
        len(server.identify_payloads),
    )
    codes = (await first.terminate(), await second.terminate())  # the follower first

    assert sorted(replies(discord)) == [f"echo: {text}" for text in texts]
    assert most_sessions == 1
    assert sessions_opened == 2
    assert codes == (0, 0), first.log + second.log


async def test_a_process_whose_gateway_is_refused_as_it_takes_the_lock_goes_on_sending(
    discord: DiscordHarness,
) -> None:
    """Taking the lock over, it opens the gateway, which Discord refuses (the Message Content
    intent was switched off meanwhile): the process still sends the replies of its turns."""
    adapter = discord.make_adapter()
    await adapter.start_sending()
    discord.server.message_content_intent = False
    try:
        with pytest.raises(ConfigError):
            await adapter.start(asyncio.Queue[InboundMessage]().put)
        await adapter.send(
            OutboundMessage(channel="discord", chat_id=GENERAL_CHANNEL_ID, text="still sending")
        )
    finally:
        await adapter.stop()

    assert replies(discord) == ["still sending"]
    assert discord.server.open_sessions() == 0
