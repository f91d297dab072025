"""Slack at the edge: `clawbot run` as a real process against the Slack stand-in, killed with
SIGKILL at random points around an arriving message, then restarted, in Socket Mode and in
HTTP (Events API) mode. Slack redelivers what was not acknowledged; clawbot acknowledges only
what it stored; so every message ends with exactly one reply answering it or a failure notice
quoting it, and none is silently lost.

The kill points, their order and the delays are drawn from a new seed each run; a failure
names it, and ``SLACK_KILL_SEED=<seed>`` replays the same run."""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import socket
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Literal

import pytest
from aiohttp import web

from clawbot.app import Clawbot
from clawbot.channels.harness import SentRecord
from clawbot.cli.service import Service
from clawbot.messages import InboundMessage
from clawbot.routing.access import AccessGateway
from clawbot.settings import Settings
from tests.spawned import KillSeed, spawn
from tests.standins.openai_api import OpenAIStandin
from tests.standins.slack import RETRY_DELAYS, Delivery, Mode, SlackHarness, free_port
from tests.test_cli import CLAWBOT, environment

KillPoint = Literal["delivered", "acked", "at the model", "replied"]
KILL_POINTS: tuple[KillPoint, ...] = ("delivered", "acked", "at the model", "replied")
DEADLINE = 20.0
FAILURE = "Sorry, "  # how clawbot's failure notices begin
pytestmark = pytest.mark.usefixtures("spawned_processes")

SEED = KillSeed.drawn("SLACK_KILL_SEED")
"""Seeds the kill points, their order and the delays: each run tries new ones, and a failure
names its seed, so ``SLACK_KILL_SEED=<seed>`` replays the same run."""

SPEED_UP = 30
RETRIES = tuple(delay / SPEED_UP for delay in RETRY_DELAYS)
"""Slack's Events API retries (at once, after 1 and after 5 minutes), 30 times faster: at 0,
2 and 10 s. Slack gives up after the third, so a message that reached no live process in all
four tries would be lost on real Slack too; a restart has to beat that window (about 6
minutes on Slack, 12 s here), as any process supervisor does."""
RETRY_WINDOW = sum(RETRIES)


async def until(condition: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


class BotProcess:
    """One `clawbot run` serving Slack (Socket Mode or HTTP); logs go to a file per start."""

    def __init__(self, harness: SlackHarness, env: dict[str, str], cwd: Path) -> None:
        self.harness, self.env, self.cwd = harness, env, cwd
        self.process: asyncio.subprocess.Process | None = None
        self.starts = 0
        self.killed_at: float | None = None
        self.downtimes: list[float] = []
        """Seconds from each kill until Slack could reach the next process."""

    async def start(self) -> None:
        """Start the bot and return once Slack can reach it: a live Socket Mode connection,
        or the Request URL taking connections (HTTP mode)."""
        standin = self.harness.standin
        opened = standin.connections_opened
        self.starts += 1
        log = (self.cwd / f"bot-{self.starts}.log").open("wb")
        self.process = await spawn(
            *CLAWBOT, "run", env=self.env, cwd=self.cwd, stdout=log, stderr=log
        )
        log.close()
        what = f"bot start {self.starts} to be reachable (see {self.cwd}/bot-{self.starts}.log)"
        if self.harness.mode == "http":
            await until(self.listening, what)
        else:
            await until(
                lambda: standin.connections_opened > opened and bool(standin.live_sockets()), what
            )
        if self.killed_at is not None:
            self.downtimes.append(asyncio.get_running_loop().time() - self.killed_at)
            self.killed_at = None

    def listening(self) -> bool:
        """Whether the Request URL's port takes a TCP connection now."""
        port = int(self.env["CLAWBOT_SLACK_HTTP_PORT"])
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.1):
            return True
        return False

    def kill_now(self) -> None:
        """SIGKILL at once (from a stand-in callback, at the exact point of interest)."""
        self.killer()()

    def killer(self) -> Callable[[], None]:
        """SIGKILL for this process only: a timer that fires late spares the next one."""
        process = self.process
        assert process is not None

        def kill() -> None:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGKILL)

        return kill

    async def wait_killed(self) -> None:
        assert self.process is not None
        code = await asyncio.wait_for(self.process.wait(), DEADLINE)
        assert code == -signal.SIGKILL, f"exited with {code} before the kill"
        self.killed_at = asyncio.get_running_loop().time()

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
async def slack(request: pytest.FixtureRequest) -> AsyncIterator[SlackHarness]:
    """The stand-in, in Socket Mode unless a test asks for ``"http"`` (indirect parameter)."""
    mode: Mode = getattr(request, "param", "socket")
    harness = SlackHarness(mode)
    harness.standin.sender.retry_delays = RETRIES
    await harness.start()
    yield harness
    await harness.stop()


def bot_environment(home: Path, slack: SlackHarness, model: OpenAIStandin) -> dict[str, str]:
    standin = slack.standin
    settings = {
        "CLAWBOT_SLACK_BOT_TOKEN": standin.bot_token,
        "CLAWBOT_SLACK_API_BASE": standin.api_base,
        "CLAWBOT_DM_POLICY": "open",
        # these tests count the messages sent; streamed replies have tests of their own
        "CLAWBOT_STREAMING": "off",
        "CLAWBOT_SHUTDOWN_TIMEOUT": "10",
    }
    if slack.mode == "http":
        port = free_port()
        standin.sender.events_url = f"http://127.0.0.1:{port}/slack/events"
        settings.update(
            CLAWBOT_SLACK_MODE="http",
            CLAWBOT_SLACK_SIGNING_SECRET=standin.signing_secret,
            CLAWBOT_SLACK_HTTP_HOST="127.0.0.1",
            CLAWBOT_SLACK_HTTP_PORT=str(port),
            CLAWBOT_SLACK_HTTP_PATH="/slack/events",
        )
    else:
        settings["CLAWBOT_SLACK_APP_TOKEN"] = standin.app_token
    return environment(home, model, **settings)


def replies_in(slack: SlackHarness, chat_id: str) -> list[SentRecord]:
    return [record for record in slack.sent() if record.chat_id == chat_id]


async def all_answered(slack: SlackHarness, chats: list[str], bot: BotProcess) -> None:
    """Wait until every chat has a reply; fail naming the chats that have none (lost). A
    message may wait for Slack's last retry, hence the retry window on top."""
    try:
        await until(
            lambda: all(replies_in(slack, c) for c in chats), "replies", DEADLINE + RETRY_WINDOW
        )
    except AssertionError:
        lost = [chat for chat in chats if not replies_in(slack, chat)]
        raise AssertionError(
            f"no reply, ever, to the messages in {lost}; {gave_up(slack, bot)}"
        ) from None


def gave_up(slack: SlackHarness, bot: BotProcess) -> str:
    """What Slack gave up delivering, and whether the bot was down longer than Slack retries
    (a slow machine: real Slack would lose that message too) or not (clawbot lost it)."""
    unacked = [d.attempts for d in slack.standin.sender.deliveries if not d.acked]
    down = max(bot.downtimes, default=0.0)
    return (
        f"deliveries Slack gave up on: {unacked} (the bot was down at most {down:.1f} s after "
        f"a kill; Slack retries for {RETRY_WINDOW:g} s here)"
    )


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
    if point == "delivered":  # within 20 ms of the event going on the wire (acked or not)

        def soon(_: Delivery) -> None:
            sender.on_send = None  # not again for a retry that meets the dying process
            loop.call_later(rng.uniform(0, 0.02), bot.killer())

        sender.on_send = soon
    elif point == "acked":  # the instant the ack arrives
        sender.on_ack = lambda _: bot.kill_now()
    elif point == "at the model":
        model.hung.clear()
        model.script = [{"hang": True}]
    await slack.inject_message(f"message from {chat}", sender_id=chat[1:], wait=False)
    if point == "at the model":  # up to 0.1 s into the model request
        assert await asyncio.to_thread(model.hung.wait, DEADLINE), "the turn never reached it"
        loop.call_later(rng.uniform(0, 0.1), bot.killer())
    elif point == "replied":  # up to 0.3 s after Slack accepted the reply
        await until(lambda: bool(replies_in(slack, chat)), f"the reply in {chat}")
        loop.call_later(rng.uniform(0, 0.3), bot.killer())
    try:
        await bot.wait_killed()
    finally:
        sender.on_send = sender.on_ack = None


@pytest.mark.parametrize("slack", ["socket", "http"], indirect=True)
async def test_a_bot_killed_around_arriving_messages_loses_none_and_answers_each(
    slack: SlackHarness, model: OpenAIStandin, tmp_path: Path
) -> None:
    """Each kill point once, in an order drawn from the seed.

    In Socket Mode an envelope unacked when its connection died is sent again on the next
    connection. In HTTP mode the POST meets a dead process (a reset or a refused connection)
    and Slack tries again at once, then after 1 and 5 minutes (:data:`RETRIES`, compressed),
    then gives up: a bot down through all four tries loses the message on real Slack too, so
    the bot is started again at once, and is reachable well within that window (a failure
    says how long it was down, telling a slow machine from a lost message)."""
    with SEED.named():
        await kill_around_messages(slack, model, tmp_path, SEED.random(slack.mode))


async def kill_around_messages(
    slack: SlackHarness, model: OpenAIStandin, tmp_path: Path, rng: random.Random
) -> None:
    points = rng.sample(KILL_POINTS, len(KILL_POINTS))
    bot = BotProcess(slack, bot_environment(tmp_path / "home", slack, model), tmp_path)
    chats = [f"DU{number + 1:04d}" for number in range(len(points) + 1)]
    answered_when_killed: dict[str, int] = {}
    await bot.start()
    try:
        for index, point in enumerate(points):
            if point in ("at the model", "replied"):
                # The model must be quiet but for this message's turn: earlier ones answered.
                await all_answered(slack, chats[:index], bot)
            await kill_at(point, chats[index], bot=bot, slack=slack, model=model, rng=rng)
            for chat in chats:
                if replies_in(slack, chat):
                    answered_when_killed[chat] = answered_when_killed.get(chat, 0) + 1
            await bot.start()
        # A last message once the bot is up for good: when it is answered, the start-up's
        # recovery (resumed turns, replies sent again) is over.
        probe = chats[-1]
        await slack.inject_message(f"message from {probe}", sender_id=probe[1:], wait=False)
        await all_answered(slack, chats, bot)
    finally:
        exit_code = await bot.stop()

    for chat, kill_point in zip(chats, [*points, "none"], strict=True):
        texts = [record.text for record in replies_in(slack, chat)]
        asked = f"message from {chat}"
        # Each message ends with the reply answering it or a failure notice quoting it,
        answered = texts[:1] == [f"echo: {asked}"]
        quoted = bool(texts) and texts[0].startswith(FAILURE) and asked in texts[0]
        assert answered or quoted, (chat, kill_point, texts)
        # and with that one outcome only (never a reply and a notice): exactly once, but
        # for the reply a kill may have caught before the bot recorded it as sent: a
        # restart sends it again (at least once; Slack has no idempotent post).
        assert all(t == texts[0] for t in texts), (chat, kill_point, texts)
        assert len(texts) <= 1 + answered_when_killed.get(chat, 0), (chat, kill_point, texts)
    assert all(d.acked for d in slack.standin.sender.deliveries), gave_up(slack, bot)
    assert exit_code == 0


# -- the whole bot in this process: slash commands and names ------------------------------------

OWNER = "U1001"


@pytest.fixture(params=["socket", "http"])
async def served(
    request: pytest.FixtureRequest, settings: Settings
) -> AsyncIterator[tuple[SlackHarness, Clawbot]]:
    """A bot serving Slack (Socket Mode or HTTP) with OWNER allowed in DMs and #general."""
    harness = SlackHarness(request.param)
    await harness.start()
    bot_settings = settings.model_copy(
        update={"allowed_senders": [f"slack:{OWNER}"], "allowed_groups": ["slack:C0GENERAL"]}
    )
    try:
        async with await Clawbot.open(bot_settings) as bot:
            bot.router.access = AccessGateway(bot.store, bot_settings)
            service = Service(bot, [harness.make_adapter()], shutdown_timeout=10)
            await service.start()
            try:
                yield harness, bot
            finally:
                await service.stop()
    finally:
        await harness.stop()


async def test_slash_command_status_answers_in_the_channel_it_was_typed_in(
    served: tuple[SlackHarness, Clawbot],
) -> None:
    harness, _ = served

    command = await harness.slash_command("status", sender_id=OWNER, chat_type="group")

    [reply] = await harness.wait_sent(1)
    assert [a.outcome for a in command.attempts] == ["acked"]
    assert reply.chat_id == "C0GENERAL"
    assert "Session: slack:C0GENERAL" in reply.text and "Model:" in reply.text


async def test_slash_command_in_a_dm_reports_the_same_session_as_the_text_form(
    served: tuple[SlackHarness, Clawbot],
) -> None:
    harness, _ = served

    await harness.inject_message("/status", sender_id=OWNER)
    await harness.slash_command("status", sender_id=OWNER)

    text_form, command_form = await harness.wait_sent(2)
    assert text_form.chat_id == command_form.chat_id == f"D{OWNER}"
    assert f"Session: slack:D{OWNER}" in command_form.text
    assert text_form.text.splitlines()[:3] == command_form.text.splitlines()[:3]


async def test_slash_command_from_someone_not_allowed_is_acked_and_answers_nothing(
    served: tuple[SlackHarness, Clawbot],
) -> None:
    harness, _ = served

    command = await harness.slash_command("status", sender_id="U0333", chat_type="group")
    await harness.inject_message("/status", sender_id=OWNER)  # answered: the queue moved on

    [reply] = await harness.wait_sent(1)
    assert command.acked and reply.chat_id == f"D{OWNER}"


async def test_a_stranger_waiting_for_pairing_is_listed_by_name(
    served: tuple[SlackHarness, Clawbot], tmp_path: Path
) -> None:
    harness, bot = served
    harness.standin.add_user("U0333", "Bob Stone")

    await harness.inject_message("hello?", sender_id="U0333")
    [pairing] = await harness.wait_sent(1)
    await bot.store.flush()
    listing = await asyncio.to_thread(
        subprocess.run,
        [*CLAWBOT, "pairing", "list"],
        env=environment(bot.settings.home),
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
    )

    assert "pairing code is" in pairing.text
    assert listing.returncode == 0, listing.stderr.decode()
    assert "Bob Stone (U0333)" in listing.stdout.decode()


# -- the stand-in holds the app to Slack's acknowledgement rules --------------------------------


class Endpoint:
    """A Request URL that answers each attempt with the next status, recording headers."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.headers: list[dict[str, str]] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> Endpoint:
        app = web.Application()
        app.router.add_post("/slack/events", self.answer)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}/slack/events"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()

    async def answer(self, request: web.Request) -> web.Response:
        self.headers.append(dict(request.headers))
        return web.Response(status=self.statuses.pop(0) if self.statuses else 200)


async def test_stand_in_retries_an_http_event_not_answered_2xx_three_times_then_gives_up() -> None:
    harness = SlackHarness("http")
    harness.standin.sender.retry_delays = (0.0, 0.0, 0.0)
    await harness.start()
    try:
        async with Endpoint([500, 503, 404, 500]) as endpoint:
            harness.standin.sender.events_url = endpoint.url
            delivery = harness.send_event({"type": "message", "ts": "1.1", "channel": "D1"})
            await asyncio.wait_for(delivery.finished.wait(), DEADLINE)
    finally:
        await harness.stop()

    assert delivery.gave_up and not delivery.acked
    assert [a.status for a in delivery.attempts] == [500, 503, 404, 500]
    retry_headers = [
        (h.get("X-Slack-Retry-Num"), h.get("X-Slack-Retry-Reason")) for h in endpoint.headers
    ]
    assert retry_headers == [
        (None, None),
        ("1", "http_error"),
        ("2", "http_error"),
        ("3", "http_error"),
    ]


async def test_stand_in_redelivers_an_envelope_left_unacked_when_the_connection_closed(
    slack: SlackHarness,
) -> None:
    adapter = slack.make_adapter()
    calls: list[str] = []

    async def drop_on_first(message: InboundMessage) -> None:
        calls.append(message.text)
        if len(calls) == 1:
            await slack.standin.drop_connections()

    await adapter.start(drop_on_first)
    try:
        await slack.inject_message("across a reconnect")
        [delivery] = slack.standin.sender.deliveries
    finally:
        await adapter.stop()

    assert [a.outcome for a in delivery.attempts] == ["connection_lost", "acked"]
    assert calls == ["across a reconnect", "across a reconnect"]  # the core deduplicates
