"""A third-party channel in miniature: an in-memory "echo" platform, its adapter and the
harness the shipped conformance suite drives. It imports only clawbot, never ``tests``, so
tests/test_channel_kit.py also runs it from a folder of its own, as another distribution would.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from typing import Any, Literal

from clawbot.channels.harness import SentRecord
from clawbot.channels.interface import Adapter, ChannelLimits, InboundHandler, SentMessage
from clawbot.channels.rendering import render_parts
from clawbot.errors import DeliveryError
from clawbot.messages import InboundMessage, OutboundMessage
from clawbot.settings import Settings

BOT_ID = "echo-bot"
ROOM = "room-1"


@dataclass
class Refused(Exception):
    """The echo platform's answer to a post it did not take."""

    status: int
    retry_after: float = 0
    bad_markup: bool = False


class EchoPlatform:
    """The platform: it hands updates to whoever listens and keeps what the bot posted."""

    def __init__(self) -> None:
        self.listener: InboundHandler | None = None
        self.posted: list[SentRecord] = []
        self.typing: list[str] = []
        self.failures: list[Refused] = []
        self.ids = itertools.count(1)

    def post(self, chat_id: str, text: str, thread_id: str | None, formatted: bool) -> str:
        if self.failures:
            failure = self.failures[0]
            if not failure.bad_markup or formatted:
                self.failures.pop(0)
                raise failure
        message_id = f"m{next(self.ids)}"
        self.posted.append(SentRecord(chat_id, text, thread_id, formatted, message_id))
        return message_id


class EchoAdapter(Adapter):
    name = "echo"
    limits = ChannelLimits(max_message_chars=1000, markup="discord_markdown")

    def __init__(self, platform: EchoPlatform, max_send_attempts: int = 3) -> None:
        self.platform = platform
        self.max_send_attempts = max_send_attempts

    @classmethod
    def from_settings(cls, settings: Settings) -> EchoAdapter:
        return cls(EchoPlatform())

    async def start(self, on_message: InboundHandler) -> None:
        self.platform.listener = on_message

    async def stop_intake(self) -> None:
        self.platform.listener = None

    async def stop(self) -> None:
        self.platform.listener = None

    async def send(self, message: OutboundMessage) -> list[SentMessage]:
        sent = []
        for part in render_parts(message.text, self.limits):
            message_id = await self._post(message, part.text, part.plain)
            sent.append(SentMessage(self.name, message.chat_id, message_id))
        return sent

    async def _post(self, message: OutboundMessage, text: str, plain: str) -> str:
        formatted = True
        for _ in range(self.max_send_attempts):
            try:
                return self.platform.post(message.chat_id, text, message.thread_id, formatted)
            except Refused as refused:
                if refused.bad_markup:
                    text, formatted = plain, False
                elif refused.status == 429:
                    await asyncio.sleep(refused.retry_after)
                else:
                    raise DeliveryError(f"echo refused the message ({refused.status})") from None
        raise DeliveryError("echo kept refusing the message")

    async def send_typing(self, chat_id: str, thread_id: str | None = None) -> None:
        self.platform.typing.append(chat_id)


class EchoHarness:
    """The echo platform plus the adapter pointed at it (``clawbot.channels.harness``)."""

    channel = "echo"
    max_message_chars = EchoAdapter.limits.max_message_chars
    bot_user_id = BOT_ID

    def __init__(self) -> None:
        self.platform = EchoPlatform()

    async def start(self) -> None:
        """Nothing to start: the platform lives in memory."""

    async def stop(self) -> None:
        """Nothing to stop."""

    def make_adapter(self, **overrides: Any) -> EchoAdapter:
        return EchoAdapter(self.platform, **overrides)

    async def inject_message(
        self,
        text: str,
        *,
        chat_type: Literal["dm", "group"] = "dm",
        sender_id: str = "1001",
        sender_name: str = "Ann",
        chat_id: str | None = None,
        mention: bool = False,
        thread_id: str | None = None,
        reply_to_bot: bool = False,
        from_bot: bool = False,
        from_self: bool = False,
        message_id: str | None = None,
    ) -> str:
        message_id = message_id or f"in{next(self.platform.ids)}"
        if from_self or self.platform.listener is None:  # the adapter never takes its own
            return message_id
        await self.platform.listener(
            InboundMessage(
                channel=self.channel,
                chat_id=chat_id or (ROOM if chat_type == "group" else sender_id),
                chat_type=chat_type,
                thread_id=thread_id,
                sender_id=sender_id,
                sender_name=sender_name,
                text=text,
                message_id=message_id,
                mentioned=mention or reply_to_bot,
            )
        )
        return message_id

    async def wait_sent(self, count: int, timeout: float = 5.0) -> list[SentRecord]:
        async def posted() -> None:
            while len(self.platform.posted) < count:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(posted(), timeout)
        return self.sent()

    def sent(self) -> list[SentRecord]:
        return list(self.platform.posted)

    def fail_next_sends(self, count: int = 1, *, status: int = 429, retry_after: float = 0) -> None:
        self.platform.failures += [Refused(status, retry_after) for _ in range(count)]

    def reject_formatting_next(self) -> None:
        self.platform.failures.append(Refused(400, bad_markup=True))

    def typing_events(self) -> list[str]:
        return list(self.platform.typing)
