"""The Channel interface adapters implement. Core depends on this, never on an adapter.

An adapter is two pure conversions (platform update -> InboundMessage, OutboundMessage ->
platform call) plus its connection lifecycle. Only the outbox calls ``send``.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from clawbot.errors import DeliveryError
from clawbot.messages import (
    Attachment,
    InboundMessage,
    OutboundDeletion,
    OutboundEdit,
    OutboundFile,
    OutboundMessage,
)

if TYPE_CHECKING:
    from clawbot.settings import Settings

InboundHandler = Callable[[InboundMessage], Awaitable[None]]


@runtime_checkable
class StagedHandler(Protocol):
    """An :data:`InboundHandler` whose two stages a channel may wait on apart. Called, it
    returns once the message was handled (a turn's reply sent), as any handler; ``take``
    returns as soon as the message is taken in (a command answered, a message stored and
    queued for its turn), with the rest to await. ``clawbot chat`` gives the console one, so
    a line is handed over without waiting for the turn before it."""

    async def __call__(self, message: InboundMessage) -> None: ...

    async def take(self, message: InboundMessage) -> Awaitable[object]: ...


NOT_TAKEN_IN = "Sorry, I could not take this message in. Please send it again."
"""What an adapter tells the sender, straight through the platform (not the outbox, which may
be what failed), when clawbot could not store their message and the platform will not bring
it again: the message ends with a visible failure instead of vanishing."""


@dataclass(frozen=True)
class ChannelLimits:
    """Platform constraints the shared renderer and chunker honour."""

    max_message_chars: int = 4000
    markup: str = "plain"  # "plain" | "telegram_html" | "slack_mrkdwn" | "discord_markdown"
    length_unit: Literal["chars", "utf16"] = "chars"
    """How the platform counts ``max_message_chars``: Python characters (code points) or
    UTF-16 code units (Telegram), where an emoji beyond U+FFFF counts twice."""
    message_interval: float = 0.0
    """Seconds to leave between two calls that post to one chat (messages, edits, drafts):
    the platform's documented per-chat rate, which the chat's pacer keeps. (A typing
    indicator is sent only between them, while the chat is idle.)"""
    edit_interval: float = 0.0
    """Seconds to leave between two edits of one message while a reply streams; the
    pacer drops intermediate previews rather than queueing them."""
    drafts: bool = False
    """The platform shows a streamed draft in private chats (Telegram's ``sendMessageDraft``)
    instead of a message edited in place."""
    max_upload_bytes: int = 0
    """The biggest file the platform takes from a bot; 0: the channel sends no files."""
    max_caption_chars: int = 0
    """How long a file's caption may be, counted as ``max_message_chars`` is."""


@dataclass(frozen=True)
class SentMessage:
    """What the platform said about one delivered message part."""

    channel: str
    chat_id: str
    message_id: str | None = None


@dataclass(frozen=True)
class ChatCursor:
    """How far this channel's conversation in one chat (and thread) got: the last platform
    message the bot took from it and when. ``Adapter.catch_up`` fetches what came after."""

    chat_id: str
    thread_id: str | None
    last_message_id: str | None
    last_seen: datetime


class Adapter(abc.ABC):
    """Connects one Channel. Subclasses live in the top-level ``adapters`` package."""

    name: str = ""
    limits: ChannelLimits = ChannelLimits()
    catch_up_window: timedelta = timedelta(0)
    """How far back ``catch_up`` reads missed messages; zero: the platform redelivers."""

    @classmethod
    def is_configured(cls, settings: Settings) -> bool:
        """Whether the operator gave this channel's settings (``clawbot run`` starts it then)."""
        return False

    @classmethod
    def check_settings(cls, settings: Settings) -> list[str]:
        """Problems with this channel's settings for ``clawbot doctor``; never includes a secret."""
        return []

    @classmethod
    @abc.abstractmethod
    def from_settings(cls, settings: Settings) -> Adapter:
        """Build the adapter from settings (tokens stay SecretStr until the client needs them)."""

    @abc.abstractmethod
    async def start(self, on_message: InboundHandler) -> None:
        """Connect and begin handing normalized inbound messages to ``on_message``."""

    @abc.abstractmethod
    async def stop(self) -> None:
        """Stop intake and close connections; must be safe to call twice."""

    async def stop_intake(self) -> None:  # noqa: B027
        """Stop receiving new messages but keep sending, so turns still running at shutdown
        can deliver their replies; ``stop`` follows. By default intake ends with ``stop``.
        Also called when this process loses the lock of its ``exclusive_intake``: another
        process may hold it already, so the intake's connection must end here (never two),
        and ``start`` may follow when the lock comes back."""

    @property
    def exclusive_intake(self) -> str | None:
        """The name of this adapter's intake when its platform allows it once per bot at a
        time (Telegram's long polling; a second poller gets 409 Conflict), else None: every
        process may receive (webhooks, Slack). Processes sharing a PostgreSQL database hold
        an exclusive intake through a lock of this name, one at a time; the others
        ``start_sending`` only, and ``start`` when they take the lock over. Never a secret:
        it names the lock and appears in logs."""
        return None

    async def start_sending(self) -> None:
        """Connect for sending only, while another process holds ``exclusive_intake``: this
        process still runs turns and delivers their replies. ``start`` follows if this
        process takes the intake over, and ``stop_intake`` if it loses it again. Adapters
        with an ``exclusive_intake`` implement it."""
        raise NotImplementedError(
            f"the {self.name or 'this'} channel cannot send without receiving"
        )

    @abc.abstractmethod
    async def send(self, message: OutboundMessage) -> list[SentMessage]:
        """Deliver one outbound message (already gated by the outbox)."""

    async def send_file(self, file: OutboundFile) -> list[SentMessage]:
        """Deliver one file (already gated by the outbox), shown as ``file.kind`` says where
        the platform can, its caption cut to ``limits.max_caption_chars``; raises
        ``DeliveryError`` when the platform refuses it."""
        raise DeliveryError(f"the {self.name or 'this'} channel cannot send files")

    async def edit(self, edit: OutboundEdit) -> None:  # noqa: B027
        """Replace the text of a message this adapter sent and remove its buttons (already
        gated by the outbox); raises ``DeliveryError`` when the platform refuses. Channels
        without buttons do nothing: their messages never need taking back."""

    async def delete(self, deletion: OutboundDeletion) -> None:
        """Take back a message this adapter sent (already gated by the outbox): a streamed
        reply's preview the reply no longer needs. Raises ``DeliveryError`` when the
        platform refuses (the live reply then edits the message to ``…`` instead), and
        ``RateLimitedError`` when it asks to wait. By default a channel deletes nothing."""
        raise DeliveryError(f"the {self.name or 'this'} channel cannot delete messages")

    def limits_for(self, chat_id: str) -> ChannelLimits:
        """The limits that hold in one chat: ``limits``, unless the platform's rate differs
        by kind of chat (a Telegram group allows 20 messages a minute, a private chat one a
        second). The chat's pacer keeps these."""
        return self.limits

    async def send_draft(self, chat_id: str, draft_id: int, text: str) -> None:
        """Show ``text`` as the growing draft ``draft_id`` in a private chat, where
        ``limits.drafts`` says the platform has drafts; the final reply is then sent as a
        message. Raises ``RateLimitedError`` when the platform asks to wait."""
        raise DeliveryError(f"the {self.name or 'this'} channel has no drafts")

    async def catch_up(self, chats: Sequence[ChatCursor]) -> int:
        """Hand ``on_message`` what was posted in ``chats`` while nobody received it, oldest
        first; returns how many messages it handed over. Called once ``start`` returned.

        Only for platforms that never redeliver (Discord); the dedup ledger drops anything
        handed over twice. Platforms that redeliver what was not acknowledged do nothing."""
        return 0

    @property
    def shows_live_replies(self) -> bool:
        """Whether a reply can be shown while it is written: in a draft (``limits.drafts``)
        or in a message edited as it grows (an adapter that implements ``edit`` and gives
        the ids of what it sends)."""
        return self.limits.drafts or type(self).edit is not Adapter.edit

    @property
    def supports_typing(self) -> bool:
        """True when the subclass implements a typing indicator (the router refreshes it)."""
        return type(self).send_typing is not Adapter.send_typing

    async def wait_closed(self) -> None:
        """Return when the channel ends by itself (the console at the end of its input).

        Platform channels never do: they run until ``stop``."""
        await asyncio.Event().wait()

    async def send_typing(self, chat_id: str, thread_id: str | None = None) -> None:  # noqa: B027
        """Show a typing indicator; channels without one do nothing."""

    async def fetch_attachment(self, attachment: Attachment, max_bytes: int) -> bytes:
        """Download an attachment's bytes on demand, refusing more than ``max_bytes``."""
        from clawbot.errors import InputError

        raise InputError(f"the {self.name or 'this'} channel cannot fetch attachments")
