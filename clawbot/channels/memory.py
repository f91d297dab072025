"""An in-process channel (``clawbot.testing.MemoryChannel``): tests and benchmarks push
InboundMessages in and read what the outbox delivered.

By default it takes whatever it is given, as it always did. Made ``live=True`` it also
shows replies while they are written (edits, or drafts where its limits say so) and keeps
a platform's rules, so a test sees what a person would: messages with ids, edited in place
(:meth:`MemoryChannel.chat`) or deleted, a no-op or over-long edit refused, and, with a
:class:`ChatRules`, calls closer together than the platform allows refused with a 429 and
``retry_after``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from clawbot.channels.chunking import utf16_length
from clawbot.channels.interface import Adapter, ChannelLimits, InboundHandler, SentMessage
from clawbot.channels.pacer import ONE_PART_FACTOR, PacerClock
from clawbot.channels.rendering import render_parts
from clawbot.errors import DeliveryError, InputError, RateLimitedError
from clawbot.messages import (
    Attachment,
    InboundMessage,
    OutboundDeletion,
    OutboundEdit,
    OutboundFile,
    OutboundMessage,
)
from clawbot.settings import Settings


@dataclass
class ChatRules:
    """A platform's per-chat rate, as its stand-in enforces it: a call to a chat sooner
    than ``message_interval`` after the last one (an edit of one message sooner than
    ``edit_interval`` after its last) is refused with a 429 saying how long to wait. The
    next ``refuse_next`` calls are refused regardless, asking to wait ``retry_after``."""

    clock: PacerClock
    message_interval: float = 0.0
    edit_interval: float = 0.0
    refuse_next: int = 0
    retry_after: float = 1.0
    refused: int = 0
    """Calls refused so far."""
    _last_post: dict[str, float] = field(default_factory=dict)
    _last_edit: dict[str, float] = field(default_factory=dict)

    def check(self, chat_id: str, edits: str | None) -> None:
        now = self.clock.monotonic()
        if self.refuse_next > 0:
            self.refuse_next -= 1
            self._refuse(self.retry_after)
        wait = self._last_post.get(chat_id, -1e18) + self.message_interval - now
        if edits is not None:
            wait = max(wait, self._last_edit.get(edits, -1e18) + self.edit_interval - now)
        if wait > 1e-9:
            self._refuse(wait)
        self._last_post[chat_id] = now
        if edits is not None:
            self._last_edit[edits] = now

    def _refuse(self, retry_after: float) -> None:
        self.refused += 1
        raise RateLimitedError("Too Many Requests", retry_after=retry_after)


@dataclass
class Posted:
    """A message in the chat as a person sees it now."""

    message_id: str
    chat_id: str
    text: str
    edits: int = 0


class MemoryChannel(Adapter):
    """An in-process channel: tests and benchmarks push InboundMessages in and read what
    the outbox delivered from ``sent`` and ``files`` (and, made ``live``, the chat as
    shown: ``chat``)."""

    limits = ChannelLimits(max_upload_bytes=50 * 1024 * 1024, max_caption_chars=1024)

    def __init__(
        self,
        name: str = "memory",
        *,
        live: bool = False,
        limits: ChannelLimits | None = None,
        rules: ChatRules | None = None,
    ) -> None:
        self.name = name
        self.live = live
        if limits is not None:
            self.limits = limits
        self.rules = rules
        self.sent: list[OutboundMessage] = []
        self.files: list[OutboundFile] = []
        """Files the outbox delivered, in order (``sent`` holds the messages)."""
        self.edits: list[OutboundEdit] = []
        self.drafts: list[tuple[str, int, str]] = []
        """Every draft shown: chat, draft id, text."""
        self.posted: dict[str, Posted] = {}
        self.fail_edits = False
        """Refuse every edit for good (the message was deleted, say)."""
        self.deletions: list[OutboundDeletion] = []
        """Messages taken back, in order (``posted`` shows them no more)."""
        self.fail_deletes = False
        """Refuse every deletion (a platform that lets no bot delete, say)."""
        self.typing: list[str] = []
        self.served: dict[str, bytes] = {}
        """What ``fetch_attachment`` serves, by ref (a ref not here: gone, as on a platform)."""
        self._ids = itertools.count(1)
        self._on_message: InboundHandler | None = None
        self._sent_more = asyncio.Event()

    @classmethod
    def from_settings(cls, settings: Settings) -> MemoryChannel:
        return cls()

    @property
    def shows_live_replies(self) -> bool:
        return self.live

    @property
    def supports_typing(self) -> bool:
        """Typing indicators are kept (in ``typing``) in a live chat only."""
        return self.live

    async def start(self, on_message: InboundHandler) -> None:
        self._on_message = on_message

    async def stop(self) -> None:
        self._on_message = None

    async def send(self, message: OutboundMessage) -> list[SentMessage]:
        if self.live:
            self._check(message.chat_id, None, message.text)
        message_id = str(next(self._ids))
        self.sent.append(message)
        self.posted[message_id] = Posted(message_id, message.chat_id, message.text)
        self._sent_more.set()
        return [SentMessage(channel=self.name, chat_id=message.chat_id, message_id=message_id)]

    async def send_file(self, file: OutboundFile) -> list[SentMessage]:
        self.files.append(file)
        self._sent_more.set()
        return [SentMessage(channel=self.name, chat_id=file.chat_id)]

    async def edit(self, edit: OutboundEdit) -> None:
        posted = self.posted.get(edit.message_id)
        if posted is None or self.fail_edits:
            raise DeliveryError("Bad Request: message to edit not found")
        if self.live:
            if edit.text == posted.text:
                raise DeliveryError("Bad Request: message is not modified")
            self._check(edit.chat_id, edit.message_id, edit.text)
        self.edits.append(edit)
        posted.text = edit.text
        posted.edits += 1
        self._sent_more.set()

    async def delete(self, deletion: OutboundDeletion) -> None:
        posted = self.posted.get(deletion.message_id)
        if posted is None or posted.chat_id != deletion.chat_id:
            raise DeliveryError("Bad Request: message to delete not found")
        if self.fail_deletes:
            raise DeliveryError("Bad Request: message can't be deleted")
        if self.rules is not None:
            self.rules.check(deletion.chat_id, None)
        self.deletions.append(deletion)
        del self.posted[deletion.message_id]
        self._sent_more.set()

    async def send_draft(self, chat_id: str, draft_id: int, text: str) -> None:
        if not self.limits.drafts:
            await super().send_draft(chat_id, draft_id, text)
        self._check(chat_id, f"draft:{draft_id}", text)
        self.drafts.append((chat_id, draft_id, text))
        self._sent_more.set()

    async def send_typing(self, chat_id: str, thread_id: str | None = None) -> None:
        self.typing.append(chat_id)
        self._sent_more.set()

    def _check(self, chat_id: str, edits: str | None, text: str) -> None:
        measure = utf16_length if self.limits.length_unit == "utf16" else len
        if measure(text) * ONE_PART_FACTOR > self.limits.max_message_chars and (
            len(render_parts(text, self.limits)) > 1
        ):
            raise DeliveryError("Bad Request: message is too long")
        if self.rules is not None:
            self.rules.check(chat_id, edits)

    def chat(self, chat_id: str = "chat1") -> list[str]:
        """The messages of one chat as they show now, oldest first."""
        return [p.text for p in self.posted.values() if p.chat_id == chat_id]

    async def sent_when(self, wanted: Callable[[OutboundMessage], bool]) -> OutboundMessage:
        """The first message sent (already or from now on) that ``wanted`` accepts: wait for
        something a turn running in the background will send, such as an approval request."""
        while True:
            for message in self.sent:
                if wanted(message):
                    return message
            self._sent_more.clear()
            await self._sent_more.wait()

    async def shows(self, wanted: Callable[[MemoryChannel], bool]) -> None:
        """Return once ``wanted`` holds of the channel (checked after every call to it)."""
        while not wanted(self):
            self._sent_more.clear()
            await self._sent_more.wait()

    async def fetch_attachment(self, attachment: Attachment, max_bytes: int) -> bytes:
        data = self.served.get(attachment.ref)
        if data is None:
            raise InputError(f"{attachment.name} is no longer on the {self.name} channel")
        if len(data) > max_bytes:
            raise InputError(f"{attachment.name} is over the {max_bytes}-byte limit")
        return data

    def attach(self, name: str, data: bytes, mime_type: str, **fields: Any) -> Attachment:
        """A file this channel serves, as a message carries it (``fields``: ``duration``,
        ``voice``)."""
        ref = f"{self.name}-file-{len(self.served) + 1}"
        self.served[ref] = data
        return Attachment(name=name, mime_type=mime_type, size=len(data), ref=ref, **fields)

    def message(
        self, text: str, *, chat_id: str = "chat1", sender_id: str = "user1", **fields: Any
    ) -> InboundMessage:
        """An inbound message on this channel, with test-friendly defaults."""
        return InboundMessage(
            channel=self.name, chat_id=chat_id, sender_id=sender_id, text=text, **fields
        )

    @property
    def texts(self) -> list[str]:
        return [m.text for m in self.sent]
