"""What a channel's test harness provides, so the shipped conformance suite
(``clawbot.testing.conformance``) drives any adapter: a stand-in of the platform plus the
real adapter pointed at it. Third-party channels implement it in their own tests
(docs/channels.md)."""

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
        """Start the stand-in (e.g. a server on 127.0.0.1 with free ports)."""

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
        """Make the next ``count`` send calls fail the way the platform does: 429 with a
        retry-after (the adapter waits and retries), or another status (e.g. 403: the
        platform refuses for good)."""

    def reject_formatting_next(self) -> None:
        """Make the next formatted send fail as the platform does for bad markup."""

    def typing_events(self) -> list[str]:
        """Chat ids the bot sent a typing indicator to, in order."""

    async def stop(self) -> None:
        """Stop the stand-in."""
