"""One pacer per chat: everything clawbot sends to a chat goes through it, one call at a time.

Platforms limit how often a bot may post to one chat (Telegram about one message a second,
Slack one a second per channel, Discord five in five seconds) and answer a burst with 429s
and flood penalties. Most of those calls, once replies stream, are edits. So the outbox
gives every chat (channel and chat id) one :class:`ChatPacer`, and its messages, edits,
drafts, deletions, approval requests and typing indicators all pass through it:

- one call at a time, in the order they came, ``limits.message_interval`` apart, and two
  edits of one message ``limits.edit_interval`` apart;
- a refusal with ``retry_after`` (:class:`RateLimitedError`) is waited out, never retried
  sooner: a message or a final edit is then sent again; a preview (``retry=False``) is
  dropped, and the live reply shows its newest text when the chat is free again;
- a typing indicator is sent only while the chat is idle, and does not count as a post
  (no platform counts it as one).

Time comes from a :class:`PacerClock`, so tests keep every interval without waiting.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from clawbot.channels.chunking import utf16_length
from clawbot.channels.interface import Adapter, SentMessage
from clawbot.channels.rendering import render_parts
from clawbot.errors import RateLimitedError
from clawbot.messages import OutboundDeletion, OutboundEdit, OutboundFile, OutboundMessage

log = logging.getLogger("clawbot.outbox")
T = TypeVar("T")

NO_WAIT = -math.inf
ONE_PART_FACTOR = 8
"""A message whose length times this fits the platform's limit renders to one part: no
markup grows text eightfold (the worst, a code span of one ``&``, grows it six times)."""


class PacerClock(Protocol):
    """Time for pacing: seconds from an arbitrary origin, and a way to wait."""

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class LoopClock:
    """The event loop's clock: real time."""

    def monotonic(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class ChatPacer:
    """Serialises and spaces the calls to one chat of one adapter."""

    def __init__(self, adapter: Adapter, chat_id: str, clock: PacerClock) -> None:
        self.adapter = adapter
        self.chat_id = chat_id
        self.limits = adapter.limits_for(chat_id)
        """The intervals this chat keeps (its kind of chat's, where the platform's differ)."""
        self.clock = clock
        self._lock = asyncio.Lock()
        self._next_post = NO_WAIT
        self._next_edit: dict[str, float] = {}
        self._held_until = NO_WAIT
        self.calls = 0
        """Calls made to the platform (typing indicators included)."""

    @property
    def idle(self) -> bool:
        """Nothing is being sent and every interval has passed: the pacer may be dropped."""
        now = self.clock.monotonic()
        return (
            not self._lock.locked()
            and max(self._next_post, self._held_until) <= now
            and all(ready <= now for ready in self._next_edit.values())
        )

    # what goes through it ------------------------------------------------------------

    async def send(
        self, message: OutboundMessage, *, patience: float = math.inf
    ) -> list[SentMessage]:
        """A message that must arrive: a long one goes a part a call (so a refusal of its
        third part sends that part again, not the first two), each waited for (up to
        ``patience`` seconds a refusal)."""
        sent: list[SentMessage] = []
        async with self._lock:  # its parts one after the other, nothing in between
            for part in self.parts(message):
                sent.extend(
                    await self._attempt(
                        lambda part=part: self.adapter.send(part),  # type: ignore[misc]
                        patience=patience,
                    )
                )
        return sent

    async def send_file(self, file: OutboundFile) -> list[SentMessage]:
        """A file that must arrive, like a message: a refusal for now is waited out."""
        return await self.call(lambda: self.adapter.send_file(file))

    async def edit(
        self, edit: OutboundEdit, *, retry: bool = True, patience: float = math.inf
    ) -> None:
        """Replace a message's text; with ``retry``, a refusal for now is waited out (up to
        ``patience`` seconds) and the edit made then, else it is raised (a preview drops it)."""
        await self.call(
            lambda: self.adapter.edit(edit),
            edits=edit.message_id,
            retry=retry,
            patience=patience,
        )

    async def delete(self, deletion: OutboundDeletion, *, patience: float = math.inf) -> None:
        """Take a message back; a refusal for now is waited out (up to ``patience``
        seconds), as for a final edit."""
        await self.call(lambda: self.adapter.delete(deletion), patience=patience)

    async def preview(self, message: OutboundMessage) -> list[SentMessage]:
        """The first message of a live reply: a refusal for now is raised, not waited out
        (the live reply sends its newest text when the chat is free)."""
        return await self.call(lambda: self.adapter.send(message), retry=False)

    async def draft(self, draft_id: int, text: str) -> None:
        """Show ``text`` as a growing draft (a preview: a refusal is raised)."""
        await self.call(
            lambda: self.adapter.send_draft(self.chat_id, draft_id, text),
            edits=f"draft:{draft_id}",
            retry=False,
        )

    async def typing(self, thread_id: str | None) -> None:
        """A typing indicator, only while the chat is idle; a failure is ignored."""
        if self._lock.locked() or self._ready_at(None) > self.clock.monotonic():
            return
        async with self._lock:
            self.calls += 1
            try:
                await self.adapter.send_typing(self.chat_id, thread_id)
            except Exception as exc:  # a typing indicator is cosmetic; never fail a turn on it
                log.debug("typing indicator failed on %s: %s", self.adapter.name, exc)

    def parts(self, message: OutboundMessage) -> list[OutboundMessage]:
        """``message`` as the messages the platform will show, one per part: the first
        keeps the reply-to, the last the buttons. A short message, or one for one person
        alone, stays whole (the adapter renders it in one part)."""
        limits = self.limits
        measure = utf16_length if limits.length_unit == "utf16" else len
        if (
            message.private_to is not None
            or measure(message.text) * ONE_PART_FACTOR <= limits.max_message_chars
        ):
            return [message]
        sources = [part.source for part in render_parts(message.text, limits)]
        if len(sources) <= 1:
            return [message]
        last = len(sources) - 1
        return [
            message.model_copy(
                update={
                    "text": source,
                    "reply_to_message_id": message.reply_to_message_id if index == 0 else None,
                    "actions": message.actions if index == last else (),
                    # each part a key of its own: under one, a platform that keeps keys
                    # (Discord's nonce) would answer each later part with the first
                    "idempotency_key": (
                        f"{message.idempotency_key}:part{index}"
                        if message.idempotency_key
                        else None
                    ),
                }
            )
            for index, source in enumerate(sources)
        ]

    # pacing --------------------------------------------------------------------------

    async def until_ready(self, edits: str | None = None) -> None:
        """Wait, without holding the chat, until a call (an edit of ``edits``) could go:
        a live reply then reads its newest text."""
        while (delay := self._ready_at(edits) - self.clock.monotonic()) > 0:
            await self.clock.sleep(delay)

    async def call(
        self,
        make: Callable[[], Awaitable[T]],
        *,
        edits: str | None = None,
        retry: bool = True,
        patience: float = math.inf,
    ) -> T:
        """Make one platform call in the chat's turn, its intervals kept. ``edits``: the
        message (or draft) it rewrites, for ``edit_interval``. A refusal for now is waited
        out and the call made again, unless ``retry`` is off or the platform asks to wait
        longer than ``patience`` seconds: then it is raised."""
        async with self._lock:
            return await self._attempt(make, edits=edits, retry=retry, patience=patience)

    async def _attempt(
        self,
        make: Callable[[], Awaitable[T]],
        *,
        edits: str | None = None,
        retry: bool = True,
        patience: float = math.inf,
    ) -> T:
        while True:
            await self.until_ready(edits)
            try:
                result = await make()
            except RateLimitedError as exc:
                self._spent(edits)
                self._held_until = self.clock.monotonic() + exc.retry_after
                if not retry or exc.retry_after > patience:
                    raise
                log.info(
                    "%s asked to wait %.1f s in chat %s; sending again then",
                    self.adapter.name,
                    exc.retry_after,
                    self.chat_id,
                )
                continue
            except BaseException:
                self._spent(edits)
                raise
            self._spent(edits)
            return result

    def _ready_at(self, edits: str | None) -> float:
        ready = max(self._next_post, self._held_until)
        if edits is not None:
            ready = max(ready, self._next_edit.get(edits, NO_WAIT))
        return ready

    def _spent(self, edits: str | None) -> None:
        """A call ended: the next waits its intervals from now (the end of this one, so a
        slow call never brings the next one closer to it at the platform)."""
        self.calls += 1
        now = self.clock.monotonic()
        limits = self.limits
        self._next_post = now + limits.message_interval
        if edits is not None:
            self._next_edit[edits] = now + max(limits.edit_interval, limits.message_interval)
            if len(self._next_edit) > 64:
                self._next_edit = {k: v for k, v in self._next_edit.items() if v > now}


class VirtualClock:
    """Time for the outbox's pacers (``bot.outbox.clock``) in tests and benchmarks, that
    passes only when something
    waits: a wait of 2 s moves it on by 2 s, at once (two waits side by side, one after the
    other). Intervals are kept as in real time, and a test of a rate limit takes no time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.waited = 0.0
        """Seconds of waits asked for so far."""
        self._moving = asyncio.Event()
        self._moving.set()

    def monotonic(self) -> float:
        return self.now

    def pause(self) -> None:
        """Time stands still: a wait ends only after :meth:`resume` (what happens "at once",
        before any wait could end)."""
        self._moving.clear()

    def resume(self) -> None:
        self._moving.set()

    async def sleep(self, seconds: float) -> None:
        seconds = max(0.0, seconds)
        if seconds and not self._moving.is_set():
            await self._moving.wait()
        self.waited += seconds
        self.now += seconds
        await asyncio.sleep(0)
