"""Nothing lost at the Telegram edge, seen from outside: ``clawbot run`` as a subprocess against
the Bot API stand-in (in this test's event loop) and the OpenAI-compatible stand-in.

The process is SIGKILLed at chosen points of the exchange around an arriving message, then
started again; every message must end with its reply (or a visible failure message) and none
may vanish. Telegram confirms an update when a ``getUpdates`` offset passes it (polling) or when
the webhook answers 2xx, so a bot that confirms before storing loses what it held in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import signal
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from telegram import Bot, Update
from telegram.error import TimedOut

from adapters.telegram.intake import BotApiRequest, PollingIntake
from clawbot.channels.interface import NOT_TAKEN_IN
from tests.spawned import KillSeed, spawn
from tests.standins.openai_api import OpenAIStandin
from tests.standins.telegram import (
    DEFAULT_TOKEN,
    TelegramHarness,
    TelegramStandIn,
    WebhookAttempt,
)
from tests.test_cli import CLAWBOT, environment

SEED = KillSeed.drawn("TELEGRAM_KILL_SEED")
"""Seeds the kill delays: each run tries new ones, and a failure names its seed, so
``TELEGRAM_KILL_SEED=<seed>`` replays the same delays."""

START_TIMEOUT = 60.0
pytestmark = pytest.mark.usefixtures("spawned_processes")
REPLY_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class BotProcess:
    """One ``clawbot run`` subprocess; its stderr is drained as it comes so the pipe never
    fills, and kept for the assertions."""

    process: asyncio.subprocess.Process
    stderr: list[str] = field(default_factory=list)
    _drain: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, env: dict[str, str], cwd: Path) -> BotProcess:
        process = await spawn(
            *CLAWBOT,
            "run",
            "--channel",
            "telegram",
            env=env,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        bot = cls(process)
        bot._drain = asyncio.create_task(bot._read_stderr())
        return bot

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            self.stderr.append(line.decode(errors="replace"))

    @property
    def log(self) -> str:
        return "".join(self.stderr)

    def kill(self) -> None:
        """SIGKILL now (synchronous, so a stand-in callback can kill at an exact point)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGKILL)

    async def wait(self, timeout: float = 30.0) -> int:
        """Wait for the exit (reaping the process, so the next start sees its pid gone)."""
        code = await asyncio.wait_for(self.process.wait(), timeout)
        if self._drain is not None:
            await asyncio.wait_for(self._drain, timeout)
        return code

    async def terminate(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return await self.wait()


@pytest.fixture
async def harness() -> AsyncIterator[TelegramHarness]:
    h = TelegramHarness()
    await h.start()
    yield h
    await h.stop()


@pytest.fixture
def model() -> Iterator[OpenAIStandin]:
    server = OpenAIStandin()
    with server.running():
        yield server


def bot_environment(
    tmp_path: Path, harness: TelegramHarness, model: OpenAIStandin, **extra: str
) -> dict[str, str]:
    settings = {
        "CLAWBOT_DM_POLICY": "open",
        # these tests count the messages sent; streamed replies have tests of their own
        "CLAWBOT_STREAMING": "off",
        "CLAWBOT_TELEGRAM_TOKEN": harness.token,
        "CLAWBOT_TELEGRAM_API_BASE": f"{harness.server.url}/bot",
        "CLAWBOT_TELEGRAM_FILE_BASE": f"{harness.server.url}/file/bot",
    }
    return environment(tmp_path / "home", model, **{**settings, **extra})


def getupdates_calls(harness: TelegramHarness) -> int:
    return sum(1 for method, _ in harness.server.calls if method == "getUpdates")


async def start_polling_bot(env: dict[str, str], cwd: Path, harness: TelegramHarness) -> BotProcess:
    """Start ``clawbot run`` and return once it has sent its first getUpdates."""
    before = getupdates_calls(harness)
    bot = await BotProcess.start(env, cwd)
    try:
        await harness.server.wait_for(lambda: getupdates_calls(harness) > before, START_TIMEOUT)
    except TimeoutError:
        bot.kill()
        await bot.wait()
        raise AssertionError("the bot never polled:\n" + bot.log) from None
    return bot


def texts_to(harness: TelegramHarness, chat_id: str) -> list[str]:
    return [record.text for record in harness.sent() if record.chat_id == chat_id]


async def wait_replied(harness: TelegramHarness, chat_ids: list[str], bot: BotProcess) -> None:
    try:
        await harness.server.wait_for(
            lambda: all(texts_to(harness, chat) for chat in chat_ids), REPLY_TIMEOUT
        )
    except TimeoutError:
        raise AssertionError(
            f"no reply in chats {chat_ids} ({SEED}); bot log:\n{bot.log}"
        ) from None


def offset_of(params: dict[str, Any]) -> int:
    return int(params.get("offset") or 0)


def from_chat(update: dict[str, Any], chat_id: str) -> bool:
    return str(update.get("message", {}).get("chat", {}).get("id")) == chat_id


# ---------------------------------------------------------------- SIGKILL while polling


@dataclass(frozen=True)
class Arrival:
    """One message of the crash scenario: who sends it and where the process is killed."""

    kill_point: str
    sender: str

    @property
    def text(self) -> str:
        return f"message at kill point {self.kill_point}"

    @property
    def reply(self) -> str:
        return f"echo: {self.text}"


ARRIVALS = (
    Arrival("fetched", "1001"),  # a few ms after getUpdates handed the update over
    Arrival("confirming-poll", "1002"),  # the instant a getUpdates offset confirms it
    Arrival("at-the-model", "1003"),  # mid-turn, the model request in flight
    Arrival("after-the-reply", "1004"),  # up to 0.3 s after Telegram accepted the reply
)
PROBE = Arrival("none", "1005")


class KillAt:
    """Stand-in observers that SIGKILL the bot at an arrival's kill point."""

    def __init__(
        self, arrival: Arrival, bot: BotProcess, server: TelegramStandIn, rng: random.Random
    ) -> None:
        self.arrival, self.bot, self.server, self.rng = arrival, bot, server, rng
        self.reply_accepted = False

    def on_call(self, method: str, params: dict[str, Any]) -> None:
        if self.arrival.kill_point != "confirming-poll" or method != "getUpdates":
            return
        pending = [u for u in self.server.updates if from_chat(u, self.arrival.sender)]
        if pending and offset_of(params) > pending[0]["update_id"]:
            self.bot.kill()  # the stand-in still applies the offset: the call arrived

    def on_result(self, method: str, params: dict[str, Any], result: Any) -> None:
        loop = asyncio.get_running_loop()
        point, sender = self.arrival.kill_point, self.arrival.sender
        if (
            point == "fetched"
            and method == "getUpdates"
            and any(from_chat(u, sender) for u in result)
        ):
            loop.call_later(self.rng.uniform(0, 0.02), self.bot.kill)
        elif (
            point == "after-the-reply"
            and method == "sendMessage"
            and str(params.get("chat_id")) == sender
        ):
            self.reply_accepted = True
            loop.call_later(self.rng.uniform(0, 0.3), self.bot.kill)


async def test_no_polled_message_is_lost_when_the_process_is_killed_around_its_arrival(
    tmp_path: Path, harness: TelegramHarness, model: OpenAIStandin
) -> None:
    rng = SEED.random()
    env = bot_environment(tmp_path, harness, model)
    server = harness.server
    bot = await start_polling_bot(env, tmp_path, harness)
    logs: list[str] = []
    replied_before_the_kill: set[str] = set()

    for index, arrival in enumerate(ARRIVALS):
        if arrival.kill_point in ("at-the-model", "after-the-reply"):
            # The model must be quiet but for this message's turn: earlier ones answered.
            await wait_replied(harness, [a.sender for a in ARRIVALS[:index]], bot)
        if arrival.kill_point == "at-the-model":
            model.script = [{"hang": True}]
        killer = KillAt(arrival, bot, server, rng)
        server.on_call, server.on_result = killer.on_call, killer.on_result
        await harness.inject_message(
            arrival.text, sender_id=arrival.sender, sender_name=f"User {arrival.sender}"
        )
        if arrival.kill_point == "at-the-model":
            assert await asyncio.to_thread(model.hung.wait, REPLY_TIMEOUT), bot.log
            bot.kill()
        code = await bot.wait(REPLY_TIMEOUT)
        assert code == -signal.SIGKILL, f"not killed at {arrival.kill_point}:\n{bot.log}"
        server.on_call = server.on_result = None
        if killer.reply_accepted:
            replied_before_the_kill.add(arrival.sender)
        logs.append(bot.log)
        bot = await start_polling_bot(env, tmp_path, harness)

    # A new message after the last restart: once it is answered, the start-up's recovery and
    # re-sending of replies is over (the first message waits for it).
    await harness.inject_message(PROBE.text, sender_id=PROBE.sender)
    await wait_replied(harness, [a.sender for a in (*ARRIVALS, PROBE)], bot)
    exit_code = await bot.terminate()
    logs.append(bot.log)

    for arrival in (*ARRIVALS, PROBE):
        replies = texts_to(harness, arrival.sender)
        if arrival.sender in replied_before_the_kill:
            # At least once: killed before it recorded the reply as sent, a process sends it
            # again at start-up. Never more than that one repeat.
            assert replies in ([arrival.reply], [arrival.reply] * 2), (arrival, replies, SEED)
        else:
            assert replies == [arrival.reply], (arrival, replies, SEED)
    assert server.updates == [], "every update was confirmed in the end"
    assert exit_code == 0, logs[-1]
    assert not any("Traceback" in log for log in logs), "\n".join(logs)


# ---------------------------------------------------------------- a kill after each message

KILLED_MESSAGES = 12
FAILURE = "Sorry, "
"""How clawbot's failure notices begin."""


def outcomes_of(text: str, sent: list[str]) -> list[int]:
    """Where in ``sent`` the bot said something about one message: the echo of a turn it
    was an input of (its own, or a ``[Backlog]`` turn it was merged into), or a failure
    notice quoting it."""
    return [index for index, s in enumerate(sent) if text in s]


async def test_each_of_twelve_messages_followed_by_a_kill_is_answered_or_quoted_in_a_notice(
    tmp_path: Path, harness: TelegramHarness, model: OpenAIStandin
) -> None:
    """The red team's run: one chat, a SIGKILL 0.02-0.6 s after each of 12 messages (while
    the last start's recovered turns are on their way), then a run that drains. Each
    message must end with exactly one reply answering it or one failure notice quoting it,
    never both, never none; and a message is given up on only after its turn reached the
    model (a process killed while still starting costs it no attempt)."""
    rng = SEED.random("twelve")
    env = bot_environment(tmp_path, harness, model)
    texts = [f"question {n:02d} {rng.randrange(10**6):06d}" for n in range(KILLED_MESSAGES)]
    sent_by: list[int] = []  # for each text sent to the chat, the start that sent it
    logs: list[str] = []
    with SEED.named():
        for text in texts:
            bot = await start_polling_bot(env, tmp_path, harness)
            await harness.inject_message(text, sender_id="1001")
            asyncio.get_running_loop().call_later(rng.uniform(0.02, 0.6), bot.kill)
            assert await bot.wait(REPLY_TIMEOUT) == -signal.SIGKILL, bot.log
            sent_by += [len(logs)] * (len(texts_to(harness, "1001")) - len(sent_by))
            logs.append(bot.log)

        bot = await start_polling_bot(env, tmp_path, harness)
        try:
            await harness.server.wait_for(
                lambda: all(outcomes_of(t, texts_to(harness, "1001")) for t in texts),
                REPLY_TIMEOUT,
            )
        except TimeoutError:
            sent = texts_to(harness, "1001")
            silent = [t for t in texts if not outcomes_of(t, sent)]
            raise AssertionError(f"no reply and no notice for {silent}:\n{bot.log}") from None
        exit_code = await bot.terminate()
        logs.append(bot.log)
        sent = texts_to(harness, "1001")
        sent_by += [len(logs) - 1] * (len(sent) - len(sent_by))

        asked = [
            str(m["content"]) for r in model.requests for m in r["messages"] if m["role"] == "user"
        ]
        for text in texts:
            found = outcomes_of(text, sent)
            outcomes = [sent[index] for index in found]
            first = outcomes[0]
            # (found by its text: a notice about it quotes it)
            assert first.startswith(("echo: ", FAILURE)), (text, outcomes)
            if first.startswith(FAILURE):
                assert any(text in request for request in asked), (text, "given up unasked")
            # Once, but for a reply a kill caught before it was recorded as sent: the next
            # start sends it again (at least once: Telegram has no idempotent send).
            senders = [sent_by[index] for index in found]
            assert len(outcomes) == 1 or (
                len(outcomes) == 2 and outcomes[1] == first and senders[0] < senders[1]
            ), (text, outcomes, senders)
        unrelated = [s for s in sent if not any(text in s for text in texts)]
        assert unrelated == [], "a reply or notice that names none of the messages"
        assert exit_code == 0, logs[-1]
        assert not any("Traceback" in log for log in logs), "\n".join(logs)


# ---------------------------------------------------------------- SIGKILL in webhook mode


async def test_a_webhook_update_is_answered_200_only_once_it_is_stored(
    tmp_path: Path, harness: TelegramHarness, model: OpenAIStandin
) -> None:
    port = free_port()
    env = bot_environment(
        tmp_path,
        harness,
        model,
        CLAWBOT_TELEGRAM_MODE="webhook",
        CLAWBOT_TELEGRAM_WEBHOOK_URL=f"http://127.0.0.1:{port}/telegram",
        CLAWBOT_TELEGRAM_WEBHOOK_PORT=str(port),
        CLAWBOT_TELEGRAM_WEBHOOK_SECRET="hook-secret_123",
    )
    server = harness.server
    bot = await BotProcess.start(env, tmp_path)
    await server.wait_for(lambda: bool(server.webhook_url), START_TIMEOUT)
    answered: list[WebhookAttempt] = []

    def kill_on_success(attempt: WebhookAttempt) -> None:
        answered.append(attempt)
        if attempt.status == 200:
            bot.kill()  # the instant Telegram holds the 200: the update is confirmed

    server.on_webhook_answer = kill_on_success
    await harness.inject_message("stored before the 200?", sender_id="1001")
    assert await bot.wait(REPLY_TIMEOUT) == -signal.SIGKILL, bot.log
    server.on_webhook_answer = None

    restarted = await BotProcess.start(env, tmp_path)
    await wait_replied(harness, ["1001"], restarted)
    exit_code = await restarted.terminate()

    assert [a.status for a in answered][-1:] == [200]
    assert server.updates == []
    assert texts_to(harness, "1001") == ["echo: stored before the 200?"]
    assert exit_code == 0, restarted.log
    assert "Traceback" not in bot.log + restarted.log


# ---------------------------------------------------------------- shutdown


async def test_sigterm_during_a_long_poll_exits_0_without_a_traceback(
    tmp_path: Path, harness: TelegramHarness, model: OpenAIStandin
) -> None:
    server = harness.server
    bot = await start_polling_bot(bot_environment(tmp_path, harness, model), tmp_path, harness)
    await harness.inject_message("hello", sender_id="1001")
    await wait_replied(harness, ["1001"], bot)
    await server.wait_for(lambda: server.polls_waiting > 0, START_TIMEOUT)

    exit_code = await bot.terminate()

    assert exit_code == 0, bot.log
    assert "Traceback" not in bot.log
    assert "received SIGTERM: stopping" in bot.log
    assert not [line for line in bot.stderr if " WARNING " in line or " ERROR " in line], bot.log
    assert server.updates == []


class OnePollConnection(BotApiRequest):
    """PTB's getUpdates transport as httpcore behaves under it: one pooled connection, and a
    cancelled request gives it back only after closing it (a few loop passes later: the
    close is awaited, shielded, inside the cancelled request). A caller that does not wait
    for the cancelled poll finds the pool occupied: PTB's "Pool timeout" at shutdown."""

    def __init__(self) -> None:
        super().__init__(connection_pool_size=1, pool_timeout=0.0)
        self._slot = asyncio.Lock()

    async def do_request(self, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        if self._slot.locked():
            raise TimedOut("Pool timeout: All connections in the connection pool are occupied.")
        async with self._slot:
            try:
                return await super().do_request(*args, **kwargs)
            except asyncio.CancelledError:
                for _ in range(3):  # closing the connection
                    await asyncio.sleep(0)
                raise


async def test_stopping_during_a_long_poll_confirms_after_the_cancelled_poll_let_go(
    harness: TelegramHarness, caplog: pytest.LogCaptureFixture
) -> None:
    server = harness.server
    base = f"{server.url}/bot"
    bot = Bot(
        harness.token,
        base_url=base,
        request=BotApiRequest(),
        get_updates_request=OnePollConnection(),
    )
    handled: list[int] = []

    async def handle(update: Update) -> None:
        handled.append(update.update_id)

    intake = PollingIntake(
        bot, handle, timeout=30, allowed_updates=["message"], scrub=lambda text: text
    )
    await bot.initialize()
    await intake.start()
    update_id = await server.push_update({"message": harness.build_message("hi")})
    await server.wait_for(lambda: handled == [update_id] and server.polls_waiting > 0)

    with caplog.at_level(logging.INFO, logger="adapters.telegram"):
        await intake.stop()
    await bot.shutdown()

    confirming = [
        p for m, p in server.calls if m == "getUpdates" and not float(p.get("timeout") or 0)
    ]
    assert [int(p["offset"]) for p in confirming] == [update_id + 1]
    assert "could not confirm" not in caplog.text


async def test_a_polled_message_the_handler_keeps_failing_on_is_answered_with_a_notice(
    harness: TelegramHarness,
) -> None:
    server = harness.server
    bot = Bot(harness.token, base_url=f"{server.url}/bot", request=BotApiRequest())

    async def handle(update: Update) -> None:
        raise RuntimeError("the store is read-only")

    intake = PollingIntake(
        bot, handle, timeout=30, allowed_updates=["message"], scrub=lambda text: text
    )
    await bot.initialize()
    await intake.start()
    try:
        message_id = await harness.inject_message("are you there?", sender_id="1001")
        await server.wait_for(lambda: not server.updates and server.polls_waiting > 0)
    finally:
        await intake.stop()
        await bot.shutdown()

    [notice] = harness.sent()
    assert (notice.chat_id, notice.text) == ("1001", NOT_TAKEN_IN)
    assert notice.raw["reply_parameters"]["message_id"] == int(message_id)
    assert server.updates == []


async def test_a_button_press_the_handler_keeps_failing_on_is_answered_under_its_message(
    harness: TelegramHarness,
) -> None:
    server = harness.server
    bot = Bot(harness.token, base_url=f"{server.url}/bot", request=BotApiRequest())
    question = harness.build_message("Run it?", chat_id="1001", from_self=True)
    server.store_message(question)

    async def handle(update: Update) -> None:
        raise RuntimeError("the store is read-only")

    intake = PollingIntake(
        bot, handle, timeout=30, allowed_updates=["callback_query"], scrub=lambda text: text
    )
    await bot.initialize()
    await intake.start()
    try:
        press = {
            "id": server.new_callback_query(),
            "from": {"id": 1001, "is_bot": False, "first_name": "Ann"},
            "message": question,
            "chat_instance": "-100177",
            "data": "/deny k7m2pq",
        }
        await server.push_update({"callback_query": press})
        await server.wait_for(lambda: not server.updates and server.polls_waiting > 0)
    finally:
        await intake.stop()
        await bot.shutdown()

    [notice] = harness.sent()
    assert (notice.chat_id, notice.text) == ("1001", NOT_TAKEN_IN)
    assert notice.raw["reply_parameters"]["message_id"] == question["message_id"]


# ---------------------------------------------------------------- start-up errors


async def run_until_exit(env: dict[str, str], cwd: Path) -> tuple[int, str]:
    bot = await BotProcess.start(env, cwd)
    try:
        code = await bot.wait(START_TIMEOUT)
    except TimeoutError:
        bot.kill()
        await bot.wait()
        raise AssertionError("clawbot run kept running:\n" + bot.log) from None
    return code, bot.log


def error_lines(log: str) -> list[str]:
    """The lines that report a problem: clawbot's own, and any log record above INFO."""
    return [
        line
        for line in log.splitlines()
        if line.startswith("clawbot:") or " WARNING " in line or " ERROR " in line
    ]


async def test_an_api_base_answering_404_is_named_in_one_line(
    tmp_path: Path, harness: TelegramHarness, model: OpenAIStandin
) -> None:
    env = bot_environment(
        tmp_path, harness, model, CLAWBOT_TELEGRAM_API_BASE=f"{harness.server.url}/not-the-api/bot"
    )

    code, log = await run_until_exit(env, tmp_path)

    assert code == 1, log
    [line] = error_lines(log)
    assert "CLAWBOT_TELEGRAM_API_BASE" in line and "404" in line, line
    assert "token" not in line.lower(), line
    assert "Traceback" not in log
    assert DEFAULT_TOKEN not in log and DEFAULT_TOKEN.split(":")[1] not in log


async def test_a_token_telegram_refuses_is_reported_as_the_token_in_one_line(
    tmp_path: Path, harness: TelegramHarness, model: OpenAIStandin
) -> None:
    wrong = "999999:" + "Z" * 35
    env = bot_environment(tmp_path, harness, model, CLAWBOT_TELEGRAM_TOKEN=wrong)

    code, log = await run_until_exit(env, tmp_path)

    assert code == 1, log
    [line] = error_lines(log)
    assert "Telegram rejected the bot token" in line and "CLAWBOT_TELEGRAM_TOKEN" in line, line
    assert "Traceback" not in log
    assert wrong not in log and "Z" * 35 not in log
