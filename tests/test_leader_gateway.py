"""Two ``clawbot run`` processes on one PostgreSQL database, against the Discord stand-in:
one gateway session per bot, opened by the process that holds its leader lock; the other logs
in over REST only and opens the gateway when the leader dies."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.postgres_server import PostgresServer
from tests.standins.discord import BOT_TOKEN, BOT_USER_ID, DiscordHarness
from tests.standins.openai_api import OpenAIStandin
from tests.test_cli import environment
from tests.test_leader_polling import RETRY, TIMEOUT, Process

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


async def test_of_two_processes_one_opens_the_discord_gateway_and_the_other_takes_over_a_kill(
    tmp_path: Path, discord: DiscordHarness, llm: OpenAIStandin, postgres_server: PostgresServer
) -> None:
    database = postgres_server.new_database(migrated=True)
    server = discord.server
    first = await Process.start(
        bot_environment(tmp_path / "one", discord, llm, database), tmp_path, "discord"
    )
    await first.wait_for_line(f"discord: this process leads {GATEWAY}")
    second = await Process.start(
        bot_environment(tmp_path / "two", discord, llm, database), tmp_path, "discord"
    )
    await second.wait_for_line(f"leads {GATEWAY}; this process sends only")
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
