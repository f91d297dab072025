"""The outbox: THE delivery gate, the only path from clawbot to any adapter's ``send``.

Rule: a message (or a file) reaches a platform only if ``deliver is True`` and its channel
is not the internal channel. Nothing else in the code base calls ``Adapter.send`` or
``Adapter.send_file``, so this is also where strings shaped like API keys and tokens are
masked before they reach a chat (a file's caption too; its bytes are the person's to ask for).

The one exception to "internal text stays internal" is :meth:`Outbox.deliver_on_behalf`: a
subagent allowed to (``subagents.message``) posts to its root session's chat, under its
role's name; an approval request a subagent needs goes the same way, to its root's person.
It is the only way text written in an internal session reaches a platform, and it still
passes the same gate (as a message of the root session).

Each chat has one pacer (``clawbot.channels.pacer``) that every call to it goes through:
messages, edits, the live preview of a streaming reply (``clawbot.channels.live_reply``,
opened here behind the same gate), approval requests and typing indicators.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from clawbot.channels.interface import Adapter, SentMessage
from clawbot.channels.live_reply import LiveReply
from clawbot.channels.pacer import ChatPacer, LoopClock, PacerClock
from clawbot.errors import DeliveryError
from clawbot.messages import (
    INTERNAL_CHANNEL,
    Action,
    OutboundDeletion,
    OutboundEdit,
    OutboundFile,
    OutboundMessage,
)
from clawbot.redaction import redactor
from clawbot.routing.sessions import Session

log = logging.getLogger("clawbot.outbox")


def may_deliver(
    message: OutboundMessage | OutboundEdit | OutboundDeletion | OutboundFile,
) -> bool:
    """The delivery rule, in one place."""
    return message.deliver is True and message.channel != INTERNAL_CHANNEL


@dataclass(frozen=True)
class Delivery:
    """What became of one outbound message."""

    status: Literal["sent", "withheld", "failed"]
    parts: tuple[SentMessage, ...] = ()
    error: str | None = None


MAX_PACERS = 1024
"""Pacers kept for chats that went quiet; past it, the idle ones are let go (an idle pacer,
its intervals passed, knows nothing a new one would not)."""


class Outbox:
    """Holds the connected adapters by channel name and gates every send."""

    def __init__(self, clock: PacerClock | None = None) -> None:
        self._adapters: dict[str, Adapter] = {}
        self._pacers: dict[tuple[str, str], ChatPacer] = {}
        self.clock: PacerClock = clock or LoopClock()
        """The pacers' time (a test's virtual clock keeps the intervals without waiting)."""

    def connect(self, adapter: Adapter) -> None:
        if adapter.name == INTERNAL_CHANNEL:
            raise ValueError("no adapter may claim the internal channel")
        self._adapters[adapter.name] = adapter

    def disconnect(self, name: str) -> None:
        self._adapters.pop(name, None)
        self._pacers = {key: p for key, p in self._pacers.items() if key[0] != name}

    def pacer(self, adapter: Adapter, chat_id: str) -> ChatPacer:
        """The one pacer of a chat, made at its first call."""
        key = (adapter.name, chat_id)
        pacer = self._pacers.get(key)
        if pacer is None or pacer.adapter is not adapter:
            if len(self._pacers) >= MAX_PACERS:
                self._pacers = {k: p for k, p in self._pacers.items() if not p.idle}
            pacer = self._pacers[key] = ChatPacer(adapter, chat_id, self.clock)
        return pacer

    def live_reply(self, template: OutboundMessage, *, chat_type: str) -> LiveReply | None:
        """A reply to show while it is written, addressed as ``template`` (its text aside),
        or None when it may not be (the gate) or cannot be (the channel shows none)."""
        adapter = self._adapters.get(template.channel)
        if not may_deliver(template) or adapter is None or not adapter.shows_live_replies:
            return None
        drafts = adapter.limits.drafts and chat_type == "dm"
        return LiveReply(
            self.pacer(adapter, template.chat_id),
            template,
            drafts=drafts,
            redact=redactor.redact,
        )

    async def finish(self, live: LiveReply, text: str) -> Delivery:
        """End a live reply with its final ``text``: the chat then shows exactly it."""
        try:
            parts = await live.finish(text)
        except DeliveryError as exc:
            log.error("delivery failed for session %s: %s", live.template.session_key, exc)
            return Delivery(status="failed", error=str(exc))
        except Exception as exc:
            log.exception("delivery crashed for session %s", live.template.session_key)
            return Delivery(status="failed", error=f"{type(exc).__name__}: {exc}")
        return Delivery(status="sent", parts=tuple(parts))

    def adapter(self, name: str) -> Adapter | None:
        return self._adapters.get(name)

    async def deliver(self, message: OutboundMessage) -> Delivery:
        if not may_deliver(message):
            log.debug("withheld %s message for %s", message.channel, message.session_key)
            return Delivery(status="withheld")
        adapter = self._adapters.get(message.channel)
        if adapter is None:
            error = f"no adapter is connected for channel {message.channel!r}"
            log.error("%s (session %s)", error, message.session_key)
            return Delivery(status="failed", error=error)
        masked = redactor.redact(message.text)
        if masked is not message.text:
            log.warning("masked a secret in a reply for session %s", message.session_key)
            message = message.model_copy(update={"text": masked})
        try:
            parts = await self.pacer(adapter, message.chat_id).send(message)
        except DeliveryError as exc:
            log.error("delivery failed for session %s: %s", message.session_key, exc)
            return Delivery(status="failed", error=str(exc))
        except Exception as exc:
            log.exception(
                "delivery to %s crashed for session %s", message.channel, message.session_key
            )
            return Delivery(status="failed", error=f"{type(exc).__name__}: {exc}")
        return Delivery(status="sent", parts=tuple(parts))

    async def send_file(self, file: OutboundFile) -> Delivery:
        """A file through the same gate as a message: withheld from an internal session or
        one that does not deliver, ``failed`` with the platform's reason."""
        if not may_deliver(file):
            log.info("withheld file %r for %s", file.name, file.session_key or file.channel)
            return Delivery(status="withheld")
        adapter = self._adapters.get(file.channel)
        if adapter is None:
            return Delivery(status="failed", error=f"no adapter is connected for {file.channel!r}")
        masked = redactor.redact(file.caption)
        if masked is not file.caption:
            log.warning("masked a secret in a file's caption for session %s", file.session_key)
            file = file.model_copy(update={"caption": masked})
        try:
            parts = await self.pacer(adapter, file.chat_id).send_file(file)
        except DeliveryError as exc:
            log.error("file delivery failed for session %s: %s", file.session_key, exc)
            return Delivery(status="failed", error=exc.message)
        except Exception as exc:
            log.exception("file delivery to %s crashed for %s", file.channel, file.session_key)
            return Delivery(status="failed", error=f"{type(exc).__name__}: {exc}")
        return Delivery(status="sent", parts=tuple(parts))

    async def deliver_on_behalf(
        self, root: Session, text: str, *, role: str, actions: tuple[Action, ...] = ()
    ) -> Delivery:
        """The only path from an internal session to a platform: ``text`` from a subagent
        running as ``role``, posted to its ``root`` session's chat as ``[role]: text``.

        The caller (``clawbot.subagents.messaging``) has checked the permission and found
        the root; this method refuses a root that is itself internal, and the message then
        passes the normal gate as the root's own (so a root that does not deliver, such as
        a scheduled job's, withholds it), chunked by its adapter like any reply."""
        if root.channel == INTERNAL_CHANNEL:
            log.warning("refused a message on behalf of %s to internal %s", role, root.key)
            return Delivery(status="withheld", error="the root session is internal")
        log.info("message on behalf of %s to %s", role, root.key)
        return await self.deliver(
            OutboundMessage(
                channel=root.channel,
                chat_id=root.chat_id,
                thread_id=root.thread_id,
                text=f"[{role}]: {text}",
                session_key=root.key,
                deliver=root.deliver,
                kind="reply" if not actions else "notice",
                actions=actions,
            )
        )

    async def edit_on_behalf(self, root: Session, message_id: str, text: str, *, role: str) -> bool:
        """Rewrite a message :meth:`deliver_on_behalf` sent (``message_id``, a part it
        returned) to ``[role]: text``, without its buttons; whether the platform took it.

        A refused edit (the message was deleted, or is too old to edit) is logged once at
        WARNING and changes nothing else: what the message showed was a courtesy."""
        edit = OutboundEdit(
            channel=root.channel,
            chat_id=root.chat_id,
            thread_id=root.thread_id,
            message_id=message_id,
            text=redactor.redact(f"[{role}]: {text}"),
            session_key=root.key,
            deliver=root.deliver,
        )
        if not may_deliver(edit):
            return False
        adapter = self._adapters.get(root.channel)
        if adapter is None:
            log.warning("could not update message %s: no %s adapter", message_id, root.channel)
            return False
        try:
            await self.pacer(adapter, root.chat_id).edit(edit)
        except DeliveryError as exc:
            log.warning("could not update message %s in %s: %s", message_id, root.key, exc.message)
            return False
        except Exception as exc:
            log.warning(
                "could not update message %s in %s (%s)", message_id, root.key, type(exc).__name__
            )
            return False
        return True

    async def typing(self, channel: str, chat_id: str, thread_id: str | None) -> None:
        """Typing indicators obey the same gate: never for internal sessions."""
        if channel == INTERNAL_CHANNEL:
            return
        adapter = self._adapters.get(channel)
        if adapter is not None:
            await self.pacer(adapter, chat_id).typing(thread_id)
