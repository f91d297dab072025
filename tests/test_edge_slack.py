"""Slack at the edge: `clawbot run` as a real process against the Slack stand-in, killed with
SIGKILL at random points around an arriving message, then restarted. Slack redelivers what
was not acknowledged; clawbot acknowledges only what it stored; so every message ends with
exactly one reply or a visible failure, and none is silently lost."""

from __future__ import annotations

import asyncio
import random
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Literal

import pytest

from tests.standins.harness import SentRecord
from tests.standins.openai_api import OpenAIStandin
from tests.standins.slack import Delivery, SlackHarness
from tests.test_cli import CLAWBOT, environment

KillPoint = Literal["delivered", "acked", "at the model", "replied"]
KILL_POINTS: tuple[KillPoint, ...] = ("delivered", "acked", "at the model", "replied")
DEADLINE = 20.0


async def until(condition: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


class BotProcess:
    """One `clawbot run` serving Slack over Socket Mode; logs go to a file per start."""

    def __init__(self, harness: SlackHarness, env: dict[str, str], cwd: Path) -> None:
        self.harness, self.env, self.cwd = harness, env, cwd
        self.process: asyncio.subprocess.Process | None = None
        self.starts = 0

    async def start(self) -> None:
        """Start the bot and return once it holds a live Socket Mode connection."""
        standin = self.harness.standin
        opened = standin.connections_opened
        self.starts += 1
        log = (self.cwd / f"bot-{self.starts}.log").open("wb")
        self.process = await asyncio.create_subprocess_exec(
            *CLAWBOT, "run", env=self.env, cwd=self.cwd, stdout=log, stderr=log
        )
        log.close()
        await until(
            lambda: standin.connections_opened > opened and bool(standin.live_sockets()),
            f"bot start {self.starts} to connect (see {self.cwd}/bot-{self.starts}.log)",
        )

    def kill_now(self) -> None:
        """SIGKILL at once (from a stand-in callback, at the exact point of interest)."""
        assert self.process is not None
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)

    async def wait_killed(self) -> None:
        assert self.process is not None
        code = await asyncio.wait_for(self.process.wait(), DEADLINE)
        assert code == -signal.SIGKILL, f"exited with {code} before the kill"

    async def stop(self) -> int:
        """SIGTERM: running turns finish and deliver, then the process exits."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.process.wait(), DEADLINE)


@pytest.fixture
def model() -> Iterator[OpenAIStandin]:
    server = OpenAIStandin()
    with server.running():
        yield server


@pytest.fixture
async def slack() -> AsyncIterator[SlackHarness]:
    harness = SlackHarness()
    # Slack retries at once, after 1 and after 5 minutes; the same rule, compressed in time.
    harness.standin.sender.retry_delays = (0.0, 1.0, 2.0)
    await harness.start()
    yield harness
    await harness.stop()


def bot_environment(home: Path, slack: SlackHarness, model: OpenAIStandin) -> dict[str, str]:
    standin = slack.standin
    return environment(
        home,
        model,
        CLAWBOT_SLACK_BOT_TOKEN=standin.bot_token,
        CLAWBOT_SLACK_APP_TOKEN=standin.app_token,
        CLAWBOT_SLACK_API_BASE=standin.api_base,
        CLAWBOT_DM_POLICY="open",
        CLAWBOT_SHUTDOWN_TIMEOUT="10",
    )


def replies_in(slack: SlackHarness, chat_id: str) -> list[SentRecord]:
    return [record for record in slack.sent() if record.chat_id == chat_id]


async def all_answered(slack: SlackHarness, chats: list[str]) -> None:
    """Wait until every chat has a reply; fail naming the chats that have none (lost)."""
    try:
        await until(lambda: all(replies_in(slack, c) for c in chats), "replies")
    except AssertionError:
        lost = [chat for chat in chats if not replies_in(slack, chat)]
        raise AssertionError(f"no reply, ever, to the messages in {lost}") from None


async def kill_at(
    point: KillPoint,
    chat: str,
    *,
    bot: BotProcess,
    slack: SlackHarness,
    model: OpenAIStandin,
    rng: random.Random,
) -> None:
    """Deliver a DM to ``chat`` and SIGKILL the bot at ``point`` of its way in."""
    sender = slack.standin.sender
    loop = asyncio.get_running_loop()
    if point == "delivered":  # within 20 ms of the envelope reaching the bot, not acked yet

        def soon(_: Delivery) -> None:
            loop.call_later(rng.uniform(0, 0.02), bot.kill_now)

        sender.on_send = soon
    elif point == "acked":  # the instant the ack arrives
        sender.on_ack = lambda _: bot.kill_now()
    elif point == "at the model":
        model.hung.clear()
        model.script = [{"hang": True}]
    await slack.inject_message(f"message from {chat}", sender_id=chat[1:], wait=False)
    if point == "at the model":
        assert await asyncio.to_thread(model.hung.wait, DEADLINE), "the turn never reached it"
        bot.kill_now()
    elif point == "replied":  # up to 0.3 s after Slack accepted the reply
        await until(lambda: bool(replies_in(slack, chat)), f"the reply in {chat}")
        loop.call_later(rng.uniform(0, 0.3), bot.kill_now)
    try:
        await bot.wait_killed()
    finally:
        sender.on_send = sender.on_ack = None


async def test_a_bot_killed_around_arriving_messages_loses_none_and_answers_each(
    slack: SlackHarness, model: OpenAIStandin, tmp_path: Path
) -> None:
    rng = random.Random(16)
    points = rng.sample(KILL_POINTS, len(KILL_POINTS))
    bot = BotProcess(slack, bot_environment(tmp_path / "home", slack, model), tmp_path)
    chats = [f"DU{number + 1:04d}" for number in range(len(points) + 1)]
    answered_when_killed: dict[str, int] = {}
    await bot.start()
    try:
        for index, point in enumerate(points):
            if point in ("at the model", "replied"):
                # The model must be quiet but for this message's turn: earlier ones answered.
                await all_answered(slack, chats[:index])
            await kill_at(point, chats[index], bot=bot, slack=slack, model=model, rng=rng)
            for chat in chats:
                if replies_in(slack, chat):
                    answered_when_killed[chat] = answered_when_killed.get(chat, 0) + 1
            await bot.start()
        # A last message once the bot is up for good: when it is answered, the start-up's
        # recovery (resumed turns, replies sent again) is over.
        probe = chats[-1]
        await slack.inject_message(f"message from {probe}", sender_id=probe[1:], wait=False)
        await all_answered(slack, chats)
    finally:
        exit_code = await bot.stop()

    for chat, kill_point in zip(chats, [*points, "none"], strict=True):
        texts = [record.text for record in replies_in(slack, chat)]
        answer = f"echo: message from {chat}"
        failure = "Sorry, I could not finish your request"
        assert texts and all(t in (answer, texts[0]) for t in texts), (chat, kill_point, texts)
        assert texts[0] == answer or texts[0].startswith(failure), (chat, kill_point, texts)
        # Exactly once, but for the reply a kill may have caught before the bot recorded it
        # as sent: a restart sends it again (at least once; Slack has no idempotent post).
        assert len(texts) <= 1 + answered_when_killed.get(chat, 0), (chat, kill_point, texts)
    assert [d for d in slack.standin.sender.deliveries if not d.acked] == []
    assert exit_code == 0
