"""The contract every platform stand-in fulfils, so one conformance suite covers every adapter."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from clawbot.channels.interface import Adapter


@dataclass
class SentRecord:
    """One message the bot posted to the stand-in, as the platform saw it."""

    chat_id: str
    text: str
    thread_id: str | None = None
    formatted: bool = False  # sent with a parse mode / markup rather than as plain text
    message_id: str = ""
    raw: dict[str, Any] = field(default_factory=dict)


class PlatformHarness(Protocol):
    """A running stand-in plus the adapter pointed at it."""

    channel: str
    max_message_chars: int
    bot_user_id: str

    async def start(self) -> None:
        """Start the stand-in server(s) on 127.0.0.1 with free ports."""

    def make_adapter(self, **overrides: Any) -> Adapter:
        """The real adapter, configured to talk to this stand-in."""

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
        """Deliver an inbound update as the platform would; returns the platform message id.

        Re-injecting the same ``message_id`` simulates a redelivered update."""

    async def wait_sent(self, count: int, timeout: float = 5.0) -> list[SentRecord]:
        """Wait until at least ``count`` messages were posted by the bot; return all of them."""

    def sent(self) -> list[SentRecord]:
        """Messages the bot has posted so far, in order."""

    def fail_next_sends(self, count: int = 1, *, status: int = 429, retry_after: float = 0) -> None:
        """Make the next ``count`` send calls fail the way the platform does (429 + retry-after)."""

    def reject_formatting_next(self) -> None:
        """Make the next formatted send fail as the platform does for bad markup."""

    def typing_events(self) -> list[str]:
        """Chat ids the bot sent a typing indicator to, in order."""

    def buttons(self, record: SentRecord) -> list[tuple[str, str]]:
        """(label, command) of each button under a message the bot sent."""

    def shown(self, record: SentRecord) -> SentRecord:
        """A message the bot sent as the platform shows it now (after any edit): its text,
        and its buttons through :meth:`buttons`."""

    def delete(self, record: SentRecord) -> None:
        """Delete a message the bot sent, as a person with the right to would."""

    def private_answers(self) -> list[tuple[str, str]]:
        """(user id, text) of each answer the bot showed one person alone, in order: a Slack
        ephemeral message, a Telegram callback query's answer, a Discord ephemeral
        interaction message."""

    async def wait_private(self, count: int, timeout: float = 5.0) -> list[tuple[str, str]]:
        """Wait until the bot showed at least ``count`` private answers; return them all."""

    async def press(
        self, record: SentRecord, label: str, *, sender_id: str = "1001", sender_name: str = "Ann"
    ) -> object:
        """Press a button under a message the bot sent, as ``sender_id``, the way the platform
        delivers it; returns once the bot acknowledged the press as the platform requires (an
        AssertionError if it did not)."""

    async def stop(self) -> None:
        """Stop the stand-in."""
