"""The channel conformance suite: the same behaviours through the whole pipeline for any
channel, shipped so a channel in its own distribution runs it too (docs/channels.md).

The real adapter talks to a stand-in of its platform (a :class:`PlatformHarness`), behind the
real service, router, access gateway, runtime with a scripted model, and outbox. Subclass
:class:`ChannelConformance` in a test module under a name pytest collects (``Test...``) and
give it ``platform``, a :class:`Platform` naming your harness::

    class TestMatrix(ChannelConformance):
        platform = Platform(name="matrix", harness=MatrixHarness, group_id="!room", ...)

Needs pytest and pytest-asyncio (any ``asyncio_mode``); no conftest and no plugin of its own.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
import pytest_asyncio

from clawbot.app import Clawbot
from clawbot.channels.harness import PlatformHarness, SentRecord
from clawbot.channels.interface import Adapter
from clawbot.cli.service import Service
from clawbot.messages import InboundMessage
from clawbot.routing.access import AccessGateway, Pairing
from clawbot.routing.router import AccessDecision
from clawbot.settings import Settings
from clawbot.testing import ModelRequest, ScriptedModel

__all__ = ["OWNER", "STRANGER", "ChannelConformance", "Platform", "World", "configure"]

OWNER = "1001"
STRANGER = "2002"


@dataclass(frozen=True)
class Platform:
    """What the suite needs to know about one platform besides its harness."""

    name: str
    harness: Callable[[], PlatformHarness]
    group_id: str  # the chat id the adapter reports for the harness's default group
    thread_id: str  # a thread/topic id in the platform's own format
    message_id: str  # a platform message id, for redelivery
    has_typing: bool
    code_open: str  # how a code block starts in the markup the platform received
    code_close: str
    markup: Callable[[SentRecord], str]  # the text as sent, markup included

    def __str__(self) -> str:
        return self.name


class Seen:
    """Wraps the access gateway to record every message that reached the router."""

    def __init__(self, gateway: AccessGateway) -> None:
        self.gateway = gateway
        self.messages: list[InboundMessage] = []
        self._changed = asyncio.Condition()

    async def __call__(self, message: InboundMessage) -> AccessDecision:
        decision = await self.gateway(message)
        async with self._changed:
            self.messages.append(message)
            self._changed.notify_all()
        return decision

    async def wait(self, count: int, timeout: float = 10.0) -> list[InboundMessage]:
        async def reached() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: len(self.messages) >= count)

        await asyncio.wait_for(reached(), timeout)
        return self.messages


@dataclass
class World:
    platform: Platform
    harness: PlatformHarness
    adapter: Adapter
    bot: Clawbot
    service: Service
    seen: Seen
    model: ScriptedModel

    async def say(self, text: str, **fields: Any) -> str:
        fields.setdefault("sender_id", OWNER)
        return await self.harness.inject_message(text, **fields)

    async def settle(self, received: int) -> None:
        """Wait until ``received`` messages reached the router and all are handled."""
        await self.seen.wait(received)
        await asyncio.wait_for(self.service.idle(), 10)


def configure(**values: Any) -> pytest.MarkDecorator:
    """Access settings for one test (a callable value gets the :class:`Platform`)."""
    return pytest.mark.parametrize("access", [values])


class Held:
    """Holds the model call until released; tells when it started."""

    def __init__(self, model: ScriptedModel) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        model.function = self.reply

    async def reply(self, request: ModelRequest) -> str:
        self.started.set()
        await asyncio.wait_for(self.release.wait(), 10)
        return "finished"


@pytest.mark.asyncio
class ChannelConformance:
    """The suite; a subclass sets ``platform`` and pytest runs every test for it."""

    platform: ClassVar[Platform]

    @pytest.fixture(autouse=True)
    def conformance_environment(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        """No test sees the developer's CLAWBOT_* settings, .env, clawbot.toml or home."""
        for name in list(os.environ):
            if name.startswith("CLAWBOT_"):
                monkeypatch.delenv(name)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("HOME", str(tmp_path / "user"))

    @pytest.fixture
    def conformance_model(self) -> Iterator[ScriptedModel]:
        model = ScriptedModel(name="conformance")
        with model.installed():
            yield model

    @pytest.fixture
    def access(self) -> dict[str, Any]:
        """Access settings a test overrides with @configure."""
        return {}

    @pytest_asyncio.fixture
    async def world(
        self, tmp_path: Path, conformance_model: ScriptedModel, access: dict[str, Any]
    ) -> AsyncIterator[World]:
        platform = self.platform
        harness = platform.harness()
        await harness.start()
        values: dict[str, Any] = {
            "allowed_senders": [f"{platform.name}:{OWNER}"],
            "allowed_groups": [f"{platform.name}:{platform.group_id}"],
        }
        values.update({k: v(platform) if callable(v) else v for k, v in access.items()})
        bot_settings = Settings(
            home=tmp_path / "home",
            model=conformance_model.model_string,
            retry_backoff=0,
            shell_unsandboxed="allow-host-access",  # no tool runs; where bwrap cannot run
            # the checks read the messages a reply was sent as: a reply shown while it is
            # written (edited in place) is checked by the streaming tests
            streaming=False,
            _env_file=None,  # type: ignore[call-arg]
        ).model_copy(update=values)
        try:
            async with await Clawbot.open(bot_settings) as bot:
                seen = Seen(AccessGateway(bot.store, bot_settings))
                bot.router.access = seen
                adapter = harness.make_adapter()
                service = Service(bot, [adapter], shutdown_timeout=10)
                await service.start()
                try:
                    yield World(platform, harness, adapter, bot, service, seen, conformance_model)
                finally:
                    await service.stop()
        finally:
            await harness.stop()

    # ---- answering ----------------------------------------------------------------------------

    async def test_dm_is_answered(self, world: World) -> None:
        world.model.add("Hello Ann!")

        await world.say("hi there")

        sent = await world.harness.wait_sent(1)
        assert [record.text for record in sent] == ["Hello Ann!"]
        assert sent[0].thread_id is None
        assert world.model.requests[0].last_user_text == "hi there"

    async def test_group_message_without_mention_starts_no_turn_but_is_context(
        self, world: World
    ) -> None:
        await world.say("the deploy is on Friday", chat_type="group")
        await world.settle(1)
        assert world.model.requests == [] and world.harness.sent() == []

        await world.say("when is the deploy?", chat_type="group", mention=True)
        await world.harness.wait_sent(1)

        users = [m["content"] for m in world.model.requests[0].messages if m["role"] == "user"]
        assert users == ["[Ann] the deploy is on Friday", "[Ann] when is the deploy?"]

    async def test_group_message_with_mention_is_answered_in_the_group(self, world: World) -> None:
        world.model.add("On it.")

        await world.say("can you help?", chat_type="group", mention=True)

        sent = await world.harness.wait_sent(1)
        assert (sent[0].chat_id, sent[0].text) == (world.platform.group_id, "On it.")
        assert world.model.requests[0].last_user_text == "[Ann] can you help?"

    async def test_thread_reply_lands_in_the_thread(self, world: World) -> None:
        thread = world.platform.thread_id

        await world.say("in the thread", chat_type="group", mention=True, thread_id=thread)

        sent = await world.harness.wait_sent(1)
        assert (sent[0].chat_id, sent[0].thread_id) == (world.platform.group_id, thread)

    async def test_long_reply_arrives_in_order_within_the_limit_with_code_reopened(
        self, world: World
    ) -> None:
        limit = world.harness.max_message_chars
        lines = limit * 3 // 2 // 40  # a code block half again as long as one message
        code = "\n".join(f"value_{n:03} = compute({n})  # step {n:03}" for n in range(1, lines + 1))
        intro = ("Intro sentence number one. " * (limit // 27))[: limit // 2].strip()
        world.model.add(f"{intro}\n\n```python\n{code}\n```\n\nThat is all.")

        await world.say("show me the code")

        await world.settle(1)
        sent = world.harness.sent()
        platform = world.platform
        markups = [platform.markup(record) for record in sent]
        assert len(sent) >= 2
        assert all(len(text) <= limit for text in markups)
        with_code = [text for text in markups if platform.code_open in text]
        assert len(with_code) >= 2, "the code block was cut, closed and reopened"
        for text in with_code:  # the first part is filled up: the intro, then the code's start
            assert text.startswith((platform.code_open, "Intro sentence", "That is all"))
            assert text.rstrip().endswith(platform.code_close) or text.endswith("That is all.")
            if platform.code_open == platform.code_close:
                assert text.count(platform.code_open) == 2
            else:
                assert text.count(platform.code_open) == text.count(platform.code_close) == 1
        steps = [int(n) for record in sent for n in re.findall(r"# step (\d{3})", record.text)]
        assert steps == list(range(1, lines + 1))
        assert sent[0].text.startswith("Intro sentence") and sent[-1].text.endswith("That is all.")

    async def test_rejected_formatting_is_resent_as_plain_text(self, world: World) -> None:
        world.harness.reject_formatting_next()
        world.model.add("**Important**: read this")

        await world.say("what matters?")

        await world.settle(1)
        sent = world.harness.sent()
        assert len(sent) == 1
        assert (sent[0].text, sent[0].formatted) == ("Important: read this", False)

    # ---- access -------------------------------------------------------------------------------

    async def test_pairing_flow_end_to_end(self, world: World) -> None:
        await world.say("hello?", sender_id=STRANGER, sender_name="Bob")
        first = await world.harness.wait_sent(1)
        code = re.search(r"pairing code is ([A-Z2-9]{8})", first[0].text)
        assert code, first[0].text
        assert world.model.requests == []

        await Pairing(world.bot.store).approve(world.platform.name, code.group(1))
        world.model.add("Welcome, Bob.")
        await world.say("may I come in now?", sender_id=STRANGER, sender_name="Bob")

        sent = await world.harness.wait_sent(2)
        assert sent[1].text == "Welcome, Bob."
        assert [r.last_user_text for r in world.model.requests] == ["may I come in now?"]

    @configure(dm_policies=lambda platform: {platform.name: "allowlist"})
    async def test_allowlist_denies_an_unknown_sender_silently(self, world: World) -> None:
        await world.say("let me in", sender_id=STRANGER)
        await world.say("hi", sender_id=OWNER)

        await world.settle(2)
        sent = world.harness.sent()
        assert len(sent) == 1
        assert [r.last_user_text for r in world.model.requests] == ["hi"]

    # ---- robustness ---------------------------------------------------------------------------

    async def test_a_redelivered_message_is_processed_once(self, world: World) -> None:
        message_id = world.platform.message_id

        await world.say("only once", message_id=message_id)
        await world.say("only once", message_id=message_id)

        await world.settle(2)
        assert len(world.harness.sent()) == 1
        assert len(world.model.requests) == 1

    async def test_rate_limited_send_is_retried_into_exactly_one_message(
        self, world: World
    ) -> None:
        world.harness.fail_next_sends(1, status=429, retry_after=0)
        world.model.add("after the wait")

        await world.say("hi")

        await world.settle(1)
        assert [record.text for record in world.harness.sent()] == ["after the wait"]

    async def test_the_bots_own_message_is_ignored(self, world: World) -> None:
        await world.say("an echo of myself", from_self=True)
        await world.say("a real question")

        await world.harness.wait_sent(1)
        await world.settle(1)
        assert [m.text for m in world.seen.messages] == ["a real question"]
        assert len(world.model.requests) == 1

    async def test_typing_is_shown_while_a_turn_runs(self, world: World) -> None:
        held = Held(world.model)
        typed = asyncio.Event()
        original = world.adapter.send_typing

        async def send_typing(chat_id: str, thread_id: str | None = None) -> None:
            await original(chat_id, thread_id)
            typed.set()

        world.adapter.send_typing = send_typing  # type: ignore[method-assign]
        await world.say("think hard")
        await held.started.wait()
        await asyncio.wait_for(typed.wait(), 10)

        typing = world.harness.typing_events()
        assert world.harness.sent() == []
        held.release.set()
        await world.harness.wait_sent(1)
        if world.platform.has_typing:
            assert typing and typing[0] == world.seen.messages[0].chat_id
        else:
            assert typing == []

    async def test_a_send_that_ultimately_fails_is_logged_and_marks_the_turn(
        self, world: World, caplog: pytest.LogCaptureFixture
    ) -> None:
        world.harness.fail_next_sends(1, status=403)

        with caplog.at_level(logging.ERROR, logger="clawbot.outbox"):
            await world.say("hi")
            await world.settle(1)

        [key] = await world.bot.store.sessions.keys()
        [job] = await world.bot.store.jobs.for_session(key)
        assert job.status == "done"
        assert (job.error or "").startswith("delivery failed: ")
        assert f"delivery failed for session {key}" in caplog.text
        assert world.harness.sent() == []

    async def test_shutdown_lets_the_running_turn_deliver_before_closing(
        self, world: World
    ) -> None:
        held = Held(world.model)
        intake_stopped = asyncio.Event()
        original = world.adapter.stop_intake

        async def stop_intake() -> None:
            await original()
            intake_stopped.set()

        world.adapter.stop_intake = stop_intake  # type: ignore[method-assign]
        await world.say("one last thing")
        await held.started.wait()

        stopping = asyncio.create_task(world.service.stop())
        await asyncio.wait_for(intake_stopped.wait(), 10)
        assert not stopping.done()
        held.release.set()
        report = await asyncio.wait_for(stopping, 15)

        assert [record.text for record in world.harness.sent()] == ["finished"]
        assert (report.finished, report.cancelled) == (1, ())
        assert world.bot.outbox.adapter(world.platform.name) is None
