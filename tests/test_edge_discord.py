"""Nothing lost at the Discord edge: a real ``clawbot run`` process, SIGKILLed around arriving
messages and started again, answers every message once (or sends a failure notice quoting it).

Discord never redelivers, so this holds only because a start reads what the last process
missed from the history of the chats it was talking in (``DiscordAdapter.catch_up``). And a
reply the last process sent but had not recorded as sent goes again at the next start, so it
shows once only because Discord returns the message its nonce already created.

The order of the kills and the delays around them are drawn from a new seed each run; a
failure names it, and ``DISCORD_KILL_SEED=<seed>`` replays the same run.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from tests.spawned import KillSeed, spawn
from tests.standins.discord import BOT_TOKEN, DiscordHarness, DiscordStandIn
from tests.standins.openai_api import OpenAIStandin
from tests.test_cli import CLAWBOT, environment

Kill = Literal["delivered", "mid_turn", "replied", "while_down", "restarting"]
KILLS: tuple[Kill, ...] = ("delivered", "mid_turn", "replied", "while_down", "restarting")
"""Up to 50 ms after the gateway delivered the message, up to 0.1 s into its turn's model
request, up to 0.3 s after its reply was posted (recorded as sent or not yet), a message
posted while no process runs, and one posted at a random moment of the restart (before the
new gateway session, or after it, before or after the start's catch-up)."""
DEADLINE = 60.0
"""Seconds any one wait may take before the test fails: a bound, never a wait by itself. The
first turn after each start waits for litellm's import, about 3 s of CPU: on a loaded 2-core
CI machine that took over 20 s."""
pytestmark = pytest.mark.usefixtures("spawned_processes")
FAILED = "Sorry"  # how clawbot starts a visible failure notice
WAITED = "[Backlog]\nMessages that arrived while you were busy, oldest first:\n1. "
"""How a message that came while its session was busy is put to the model (docs/scheduling.md)."""

SEED = KillSeed.drawn("DISCORD_KILL_SEED")
"""Seeds the order of the kills and the delays: each run tries new ones, and a failure names
its seed, so ``DISCORD_KILL_SEED=<seed>`` replays the same run."""


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


async def until(discord: DiscordHarness, condition: Callable[[], bool], what: str) -> None:
    """Wait until ``condition`` on the stand-in's state holds, looking again at each change
    (a gateway session opened or closed, a message posted); fail naming ``what`` and the
    bot's messages so far after ``DEADLINE`` seconds."""
    try:
        await discord.server.until(condition, DEADLINE)
    except TimeoutError:
        sent = [(r.chat_id, r.text) for r in discord.sent()]
        pytest.fail(f"timed out waiting until {what}; the bot's messages: {sent}")


@dataclass
class ClawbotRun:
    """``clawbot run`` as an operator starts it, pointed at the stand-ins."""

    discord: DiscordHarness
    env: dict[str, str]
    cwd: Path
    process: asyncio.subprocess.Process | None = None
    starts: int = 0

    async def start(self) -> None:
        sessions = len(self.discord.server.identify_payloads)
        log = (self.cwd / f"run-{self.starts}.log").open("wb")
        self.process = await spawn(
            *CLAWBOT, "run", env=self.env, cwd=self.cwd, stdout=log, stderr=log
        )
        log.close()
        self.starts += 1
        server = self.discord.server
        await until(
            self.discord,
            lambda: len(server.identify_payloads) > sessions and server.connected.is_set(),
            "the restarted bot opened a gateway session",
        )

    async def kill(self) -> None:
        assert self.process is not None
        self.process.kill()  # SIGKILL: no shutdown code runs
        await self.process.wait()
        connected = self.discord.server.connected
        await until(self.discord, lambda: not connected.is_set(), "the gateway noticed")

    async def terminate(self) -> int:
        assert self.process is not None
        self.process.terminate()
        return await asyncio.wait_for(self.process.wait(), DEADLINE)

    def logs(self) -> str:
        return "\n".join(
            (self.cwd / f"run-{n}.log").read_text(errors="replace") for n in range(self.starts)
        )


def replies_in(discord: DiscordHarness, chat_id: str) -> list[str]:
    return [r.text for r in discord.sent() if r.chat_id == chat_id]


def bot_environment(discord: DiscordHarness, llm: OpenAIStandin, tmp_path: Path) -> dict[str, str]:
    return environment(
        tmp_path / "home",
        llm,
        CLAWBOT_DISCORD_TOKEN=BOT_TOKEN,
        CLAWBOT_DISCORD_API_BASE=discord.server.api_base,
        CLAWBOT_DM_POLICY="open",
        # these tests count the messages sent; streamed replies have tests of their own
        CLAWBOT_STREAMING="off",
        CLAWBOT_SHUTDOWN_TIMEOUT="5",
    )


async def test_a_reply_discord_took_just_before_the_kill_shows_once(
    discord: DiscordHarness, llm: OpenAIStandin, tmp_path: Path
) -> None:
    """Killed after Discord created the reply but before the bot heard back, the bot never
    recorded the reply as sent: the next start sends it again, with the nonce it went out
    with, and Discord returns the message that nonce created instead of posting another."""
    bot = ClawbotRun(discord, bot_environment(discord, llm, tmp_path), tmp_path)
    await bot.start()
    server = discord.server
    server.hold_answers()
    asked = await discord.user_posts("hello", sender_id="2001")
    chat = str(server.messages[asked]["channel_id"])
    await until(discord, lambda: len(discord.sent()) == 1, "Discord created the reply")
    await bot.kill()
    server.release_answers()

    await bot.start()
    await until(discord, lambda: len(reply_posts(server)) == 2, "the reply was sent again")
    assert await bot.terminate() == 0, bot.logs()

    assert replies_in(discord, chat) == ["echo: hello"]
    first, again = reply_posts(server)
    assert first["nonce"] == again["nonce"]


def reply_posts(server: DiscordStandIn) -> list[dict[str, Any]]:
    """The bodies of the bot's POSTs of messages, in order, each posted or not."""
    return [
        body
        for method, path, body in server.requests
        if method == "POST" and path.endswith("/messages")
    ]


async def test_every_message_is_answered_once_whenever_the_process_is_killed(
    discord: DiscordHarness, llm: OpenAIStandin, tmp_path: Path
) -> None:
    with SEED.named():
        await kill_around_messages(discord, llm, tmp_path, SEED.random())


async def kill_around_messages(
    discord: DiscordHarness, llm: OpenAIStandin, tmp_path: Path, rng: random.Random
) -> None:
    kills = rng.sample(KILLS, k=len(KILLS))  # each kill once, in a seeded order
    bot = ClawbotRun(discord, bot_environment(discord, llm, tmp_path), tmp_path)
    await bot.start()
    # One DM conversation per round, each already under way (a session to catch up on).
    chats: list[str] = []
    for n, _ in enumerate(kills):
        first = await discord.user_posts(f"hello from {n}", sender_id=f"20{n:02}")
        chats.append(str(discord.server.messages[first]["channel_id"]))
    await until(
        discord,
        lambda: all(len(replies_in(discord, chat)) == 1 for chat in chats),
        "every conversation got its first answer",
    )

    async def kill_around_a_message(chat: str, sender_id: str, text: str, kill: Kill) -> None:
        """Post ``text`` and SIGKILL around it; the bot is running again on return."""
        if kill == "while_down":
            await bot.kill()
            await discord.user_posts(text, sender_id=sender_id)
            await bot.start()
            return
        if kill == "restarting":
            await bot.kill()

            async def post_meanwhile() -> None:
                await asyncio.sleep(rng.uniform(0, 3.0))  # a start takes about 2 s here
                await discord.user_posts(text, sender_id=sender_id)

            await asyncio.gather(bot.start(), post_meanwhile())
            return
        if kill == "mid_turn":
            llm.hung.clear()
            llm.script.append({"hang": True})
        await discord.user_posts(text, sender_id=sender_id)
        if kill == "delivered":
            await asyncio.sleep(rng.uniform(0, 0.05))
        elif kill == "mid_turn":
            assert await asyncio.to_thread(llm.hung.wait, DEADLINE), "the turn reached the model"
            await asyncio.sleep(rng.uniform(0, 0.1))
        elif kill == "replied":
            answered = f"{text!r} was answered"
            await until(discord, lambda: len(replies_in(discord, chat)) == 2, answered)
            await asyncio.sleep(rng.uniform(0, 0.3))
        await bot.kill()
        await bot.start()

    async def has_an_outcome(chat: str, what: str) -> None:
        """Wait for the answer (or failure notice) to the chat's second message: each round
        kills around its own message only. (The kill of the next round may still land
        before this answer is recorded as sent; it goes again then, and shows once.)"""
        await until(discord, lambda: len(replies_in(discord, chat)) >= 2, what)

    sent: dict[str, str] = {}
    for n, kill in enumerate(kills):
        sent[chats[n]] = f"round {n}: killed {kill}"
        await kill_around_a_message(chats[n], f"20{n:02}", sent[chats[n]], kill)
        await has_an_outcome(chats[n], f"round {n}'s outcome")

    def settled() -> bool:
        return all(len(replies_in(discord, chat)) >= 2 for chat in chats)

    await until(discord, settled, "every message has an outcome")
    assert await bot.terminate() == 0, bot.logs()

    for n, chat in enumerate(chats):
        answers = replies_in(discord, chat)
        assert len(answers) == 2, (kills[n], answers)
        assert answers[0] == f"echo: hello from {n}"
        # answered (as itself, or as the one waiting message of a backlog turn when it came
        # while the first turn was still ending: a loaded machine), or a failure notice
        # quoting the message (so the person knows what to send again)
        assert answers[1] in (f"echo: {sent[chat]}", f"echo: {WAITED}{sent[chat]}") or (
            answers[1].startswith(FAILED) and sent[chat] in answers[1]
        ), answers
    assert "Traceback" not in bot.logs()
