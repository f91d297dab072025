"""`clawbot run`'s service in-process: non-blocking intake and graceful, bounded shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from clawbot.app import Clawbot
from clawbot.channels.interface import ChatCursor, InboundHandler
from clawbot.cli.service import Service, serve
from clawbot.errors import ShuttingDownError
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel


class PushChannel(MemoryChannel):
    """A MemoryChannel whose inbound messages are pushed like a platform's, recording its
    lifecycle calls in order."""

    def __init__(self, name: str = "memory") -> None:
        super().__init__(name)
        self.events: list[str] = []
        self.intake_stopped = asyncio.Event()
        self.started = asyncio.Event()

    async def start(self, on_message: InboundHandler) -> None:
        self.events.append("start")
        await super().start(on_message)
        self.started.set()

    async def push(self, text: str, chat_id: str = "chat1", **fields: Any) -> None:
        assert self._on_message is not None, "not started"
        await self._on_message(self.message(text, chat_id=chat_id, **fields))

    async def stop_intake(self) -> None:
        self.events.append("stop_intake")
        self.intake_stopped.set()

    async def stop(self) -> None:
        self.events.append("stop")
        await super().stop()

    async def send(self, message: Any) -> Any:
        self.events.append(f"send {message.text}")
        return await super().send(message)


class Held:
    """Holds every model call until released, and tells when a call has started."""

    def __init__(self, scripted: ScriptedModel, answer: str = "done") -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.calls = 0
        self.answer = answer
        scripted.function = self.reply

    async def reply(self, request: ModelRequest) -> str:
        self.calls += 1
        self.started.set()
        await self.release.wait()
        return f"{self.answer}: {request.last_user_text}"


async def test_receiving_returns_before_the_turn_finishes(
    bot: Clawbot, scripted: ScriptedModel
) -> None:
    held = Held(scripted)
    channel = PushChannel()
    service = Service(bot, [channel], shutdown_timeout=5)
    await service.start()

    await channel.push("hi")
    await held.started.wait()

    assert service.running_turns == 1 and channel.sent == []
    held.release.set()
    await service.idle()
    assert channel.texts == ["done: hi"]
    await service.stop()


async def test_two_conversations_run_at_the_same_time(
    bot: Clawbot, scripted: ScriptedModel
) -> None:
    both = asyncio.Event()
    requests: list[str] = []

    async def reply(request: ModelRequest) -> str:
        requests.append(request.last_user_text)
        if len(requests) == 2:
            both.set()
        await both.wait()
        return "ok"

    scripted.function = reply
    channel = PushChannel()
    service = Service(bot, [channel], shutdown_timeout=5)
    await service.start()

    await channel.push("from ann", chat_id="ann")
    await channel.push("from bob", chat_id="bob")
    await asyncio.wait_for(service.idle(), 5)

    assert sorted(requests) == ["from ann", "from bob"]
    assert len(channel.sent) == 2
    await service.stop()


async def test_shutdown_stops_intake_then_lets_the_running_turn_reply_then_closes(
    bot: Clawbot, scripted: ScriptedModel
) -> None:
    held = Held(scripted)
    channel = PushChannel()
    service = Service(bot, [channel], shutdown_timeout=30)
    await service.start()
    await channel.push("hi")
    await held.started.wait()

    stopping = asyncio.create_task(service.stop())
    await channel.intake_stopped.wait()
    assert not stopping.done()
    held.release.set()
    report = await stopping

    assert channel.events == ["start", "stop_intake", "send done: hi", "stop"]
    assert (report.finished, report.cancelled) == (1, ())
    assert bot.outbox.adapter("memory") is None


async def test_a_turn_outlasting_the_shutdown_timeout_is_cancelled_and_logged(
    bot: Clawbot, scripted: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    held = Held(scripted)
    channel = PushChannel()
    service = Service(bot, [channel], shutdown_timeout=0.05)
    await service.start()
    await channel.push("never finishes", message_id="m7")
    await held.started.wait()

    with caplog.at_level(logging.WARNING, logger="clawbot.service"):
        report = await service.stop()

    assert report.cancelled == ("memory:chat1",)
    assert "cancelled the unfinished turn of session memory:chat1 (message m7)" in caplog.text
    assert channel.sent == [] and channel.events[-1] == "stop"
    jobs = await bot.store.jobs.for_session("memory:chat1")
    assert [job.status for job in jobs] == ["queued"]  # kept to resume on the next start
    transcript = await bot.store.transcripts.load("memory:chat1", 0)
    assert [entry.text for entry in transcript] == ["never finishes"]


async def test_a_message_arriving_after_intake_stopped_is_refused_so_it_is_not_acknowledged(
    bot: Clawbot, scripted: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    channel = PushChannel()
    service = Service(bot, [channel], shutdown_timeout=5)
    await service.start()
    on_message = channel._on_message
    await service.stop()
    assert on_message is not None

    with (
        caplog.at_level(logging.WARNING, logger="clawbot.service"),
        pytest.raises(ShuttingDownError),
    ):
        await on_message(channel.message("too late", message_id="m9"))

    assert "did not take a memory message that arrived during shutdown (message m9)" in (
        caplog.text
    )
    assert scripted.requests == [] and channel.sent == []


async def test_a_channel_failing_to_start_stops_those_already_started(bot: Clawbot) -> None:
    class Broken(PushChannel):
        async def start(self, on_message: InboundHandler) -> None:
            raise RuntimeError("cannot connect")

    first = PushChannel("first")
    service = Service(bot, [first, Broken("second")], shutdown_timeout=5)

    with pytest.raises(RuntimeError, match="cannot connect"):
        await service.start()

    assert first.events == ["start", "stop"]


async def test_serve_puts_the_access_gateway_in_front_of_the_router(
    bot: Clawbot, settings: Settings, scripted: ScriptedModel
) -> None:
    channel = PushChannel()
    stop = asyncio.Event()
    serving = asyncio.create_task(serve(bot, [channel], stop=stop, handle_signals=False))
    await channel.started.wait()

    await channel.push("hello", sender_id="stranger")
    stop.set()
    await serving

    assert "Your pairing code is" in channel.texts[0]
    assert scripted.requests == []


async def test_a_message_already_in_flight_when_stopping_still_gets_its_answer(
    bot: Clawbot, scripted: ScriptedModel
) -> None:
    scripted.add("still answered")
    channel = PushChannel()
    service = Service(bot, [channel], shutdown_timeout=5)
    await service.start()

    await channel.push("last words")
    await service.stop()

    assert channel.texts == ["still answered"]


async def test_a_channel_that_never_stops_its_intake_cannot_hold_up_shutdown(
    bot: Clawbot, caplog: pytest.LogCaptureFixture
) -> None:
    class Stuck(PushChannel):
        async def stop_intake(self) -> None:
            await asyncio.Event().wait()

    channel = Stuck()
    service = Service(bot, [channel], shutdown_timeout=0.05)
    await service.start()

    with caplog.at_level(logging.WARNING, logger="clawbot.service"):
        report = await asyncio.wait_for(service.stop(), 10)

    assert report.cancelled == ()
    assert channel.events[-1] == "stop"
    assert "stopping intake took over" in caplog.text


class ForgetfulPlatformChannel(PushChannel):
    """A platform that never redelivers (like Discord): at start it is told its recently
    active chats and hands over ``missed`` (chat id, text, message id) from their history."""

    catch_up_window = timedelta(hours=1)

    def __init__(self, missed: Sequence[tuple[str, str, str]] = ()) -> None:
        super().__init__()
        self.asked: list[ChatCursor] = []
        self.missed = list(missed)

    async def catch_up(self, chats: Sequence[ChatCursor]) -> int:
        self.asked.extend(chats)
        for chat_id, text, message_id in self.missed:
            await self.push(text, chat_id=chat_id, message_id=message_id)
        return len(self.missed)


async def served_before(settings: Settings, *pushed: tuple[str, str, str]) -> None:
    """A previous process that took ``pushed`` (chat id, text, message id) and stopped."""
    async with await Clawbot.open(settings) as earlier:
        channel = PushChannel()
        service = Service(earlier, [channel], shutdown_timeout=5)
        await service.start()
        for chat_id, text, message_id in pushed:
            await channel.push(text, chat_id=chat_id, message_id=message_id)
        await service.idle()
        await service.stop()


async def restart(settings: Settings, channel: PushChannel) -> int:
    """Start again with ``channel``, wait for its catch-up and what it handed over; stop."""
    async with await Clawbot.open(settings) as again:
        service = Service(again, [channel], shutdown_timeout=5)
        await service.start()
        handed_over = await service.caught_up()
        await service.idle()
        await service.stop()
    return handed_over


async def test_start_tells_a_catching_up_adapter_its_active_chats_and_their_last_message(
    settings: Settings,
) -> None:
    await served_before(settings, ("chat1", "one", "m1"), ("chat2", "two", "m2"))
    await served_before(settings, ("chat1", "three", "m3"))
    channel = ForgetfulPlatformChannel()
    await restart(settings, channel)

    assert [(c.chat_id, c.thread_id, c.last_message_id) for c in channel.asked] == [
        ("chat2", None, "m2"),
        ("chat1", None, "m3"),
    ]


async def test_messages_missed_while_down_are_answered_and_those_already_taken_are_not(
    settings: Settings, scripted: ScriptedModel
) -> None:
    scripted.add("answer one", "answer to the missed one")
    await served_before(settings, ("chat1", "one", "m1"))
    channel = ForgetfulPlatformChannel(missed=[("chat1", "one", "m1"), ("chat1", "two", "m2")])
    handed_over = await restart(settings, channel)

    assert handed_over == 2
    assert channel.texts == ["answer to the missed one"]
    assert [r.last_user_text for r in scripted.requests] == ["one", "two"]


async def test_a_chat_quiet_since_before_the_window_is_not_read(settings: Settings) -> None:
    await served_before(settings, ("chat1", "one", "m1"))
    later = datetime.now(UTC) + timedelta(microseconds=1)
    async with await Clawbot.open(settings) as again:
        quiet = await again.store.ledger.recent_chats("memory", since=later)
        elsewhere = await again.store.ledger.recent_chats("other", since=later - timedelta(hours=1))

    assert (quiet, elsewhere) == ([], [])


async def test_a_platform_that_redelivers_is_not_asked_to_catch_up(settings: Settings) -> None:
    await served_before(settings, ("chat1", "one", "m1"))

    class Redelivering(ForgetfulPlatformChannel):
        catch_up_window = timedelta(0)

    channel = Redelivering()
    assert await restart(settings, channel) == 0
    assert channel.asked == []
