"""Sessions: one conversation each, keyed by where it happens (channel + chat + thread).

A child session's key is defined here once too: ``internal:<parent key>/<child id>``. The
key names its parent, so a grandchild's key holds the whole chain; the child id (the part
after the parent's key) is what a person types in ``/subagents stop <id>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from clawbot.messages import INTERNAL_CHANNEL, ChatType, InboundMessage, OutboundMessage


def session_key(channel: str, chat_id: str, thread_id: str | None = None) -> str:
    """The stable key of the conversation a message belongs to.

    A DM chat is already per person on every platform, a group is one session per chat, and
    each thread or topic is its own session.
    """
    key = f"{channel}:{chat_id}"
    return f"{key}:{thread_id}" if thread_id else key


def session_key_for(message: InboundMessage) -> str:
    return session_key(message.channel, message.chat_id, message.thread_id)


@dataclass(frozen=True)
class Session:
    """A conversation's state. The transcript lives in the store, not on this object."""

    key: str
    channel: str
    chat_id: str
    agent_id: str
    thread_id: str | None = None
    chat_type: ChatType = "dm"
    model_override: str | None = None
    deliver: bool = True
    owner_key: str | None = None
    epoch: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    def with_changes(self, **changes: Any) -> Session:
        return replace(self, **changes)

    def notice(self, text: str, *, idempotency_key: str | None = None) -> OutboundMessage:
        """A notice to this conversation's chat (a fallback, a spent budget, a paused task),
        addressed as its replies are; the outbox's gate still decides whether it goes."""
        return OutboundMessage(
            channel=self.channel,
            chat_id=self.chat_id,
            thread_id=self.thread_id,
            text=text,
            session_key=self.key,
            deliver=self.deliver,
            kind="notice",
            idempotency_key=idempotency_key,
        )

    @classmethod
    def for_message(cls, message: InboundMessage, agent_id: str) -> Session:
        return cls(
            key=session_key_for(message),
            channel=message.channel,
            chat_id=message.chat_id,
            thread_id=message.thread_id,
            chat_type=message.chat_type,
            agent_id=agent_id,
        )


_PREFIX = f"{INTERNAL_CHANNEL}:"


def child_key(parent_key: str, child_id: str) -> str:
    """The key of ``parent_key``'s child ``child_id`` (which holds no ``/``)."""
    if not child_id or "/" in child_id:
        raise ValueError(f"a child id is not empty and holds no '/': {child_id!r}")
    return f"{_PREFIX}{parent_key}/{child_id}"


def child_id_of(key: str) -> str | None:
    """The child id in a child session's key; None for a key that is not a child's."""
    parent, child = _split(key)
    return child if parent else None


def parent_key_of(key: str) -> str | None:
    """The parent's key in a child session's key; None for a key that is not a child's."""
    parent, _ = _split(key)
    return parent or None


def _split(key: str) -> tuple[str, str]:
    if not key.startswith(_PREFIX):
        return "", ""
    parent, slash, child = key[len(_PREFIX) :].rpartition("/")
    return (parent, child) if slash and parent and child else ("", "")
