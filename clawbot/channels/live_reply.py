"""A reply shown in the chat while the model writes it, and left as exactly the reply.

The runtime hands a :class:`LiveReply` the text of each model call as it grows
(``on_text``); a task of its own shows it through the chat's pacer, never holding up the
model: the newest text wins, an intermediate one is dropped, never queued.

- Where the platform has drafts (Telegram's ``sendMessageDraft``, in private chats; a
  terminal) the text grows in a draft, and the reply is then sent as messages, as always.
- Elsewhere the first visible text is sent as a message, then edited as the text grows.
  When the text outgrows one message (cut as ``render_parts`` cuts a reply) that message
  is left as the part it holds and the text goes on in a new one.
- An edit whose text renders as the message already shows is never sent.
- At the end (:meth:`finish`) each message shown is edited to the reply's part it stands
  for, where it differs, and the parts after them are sent: the chat shows the reply as it
  would have been sent at once, each part once. When an edit is refused for good (the
  message was deleted, say), the reply from that part on is sent as new messages.
- A model call that ends in tool calls was not the reply: the next call's text replaces it
  in the same messages. A message the reply no longer needs (a round before wrote more than
  the reply, or the rest of the reply is sent anew after an edit was refused) is deleted;
  where the platform will not delete it, it is left as :data:`SUPERSEDED`.
- A turn stopped (``/stop``, a newer message that steered it, its deadline, a failure)
  leaves what was shown with :data:`STOPPED_MARK` after it (:meth:`stop`).

A word still being written is held back: previews show text up to its last space, so a
credential is shown (masked) only once it is whole.

The first preview waits :data:`FIRST_PREVIEW_HOLD` after the first text: a reply written by
then is sent once, whole, as without streaming (no preview to render, send and edit), and a
longer one shows its first words that much later, still well within what reads as at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
from collections.abc import Callable, Iterable
from contextvars import Context
from dataclasses import dataclass

from clawbot.channels.chunking import utf16_length
from clawbot.channels.interface import SentMessage
from clawbot.channels.pacer import ChatPacer
from clawbot.channels.rendering import RenderedPart, render_parts
from clawbot.errors import DeliveryError, RateLimitedError
from clawbot.messages import OutboundDeletion, OutboundEdit, OutboundMessage

log = logging.getLogger("clawbot.outbox")

STOPPED_MARK = "\n\n— stopped"
"""What a stopped reply's last shown message ends with."""
SUPERSEDED = "…"
"""What a preview message the reply needs no more shows where the platform will not delete it."""
STOP_PATIENCE = 5.0
"""Seconds a stop mark waits when the platform asks to wait; longer, it is left out."""
FIRST_PREVIEW_HOLD = 0.1
"""Seconds from the first text to the first preview: about the limit of a response that
feels instantaneous (0.1 s); a reply done sooner shows as one message, never a preview
edited to the reply a few milliseconds later."""
_draft_ids = itertools.count(1)


@dataclass
class _Shown:
    """One message of the preview."""

    message_id: str
    part: RenderedPart
    round: int
    done: bool
    """It holds a part the text has grown past: left alone until the reply is final."""


@dataclass(frozen=True)
class _Step:
    """The next call that brings the chat closer to the newest text."""

    index: int
    part: RenderedPart
    edits: str | None


class LiveReply:
    """The live preview of one reply in one chat. Made by the outbox (behind its gate)."""

    def __init__(
        self,
        pacer: ChatPacer,
        template: OutboundMessage,
        *,
        drafts: bool,
        redact: Callable[[str], str],
    ) -> None:
        self.pacer = pacer
        self.template = template
        self.drafts = drafts
        self.limits = pacer.adapter.limits
        self.visible = asyncio.Event()
        """Set once the person sees text (typing indicators stop then)."""
        self._redact = redact
        self._text = ""
        self._round = 0
        self._messages: list[_Shown] = []
        self._latest = -1  # the message holding the newest text shown
        self._broken_at: int | None = None  # from this message on, nothing can be edited
        self._draft_id = next(_draft_ids)
        self._draft: str | None = None
        self._rendered: tuple[str, list[RenderedPart]] = ("", [])
        self._wake = asyncio.Event()
        self._closed = False
        self._calling = False
        self._task: asyncio.Task[None] | None = None

    # the sink the runtime streams to ---------------------------------------------------

    def on_text(self, text: str) -> None:
        if self._closed:
            return
        self._text = text
        if self._task is None:  # in a context of its own: not the model call's (its sink)
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"live reply in {self.template.channel}", context=Context()
            )
        self._wake.set()

    def on_call_end(self, tool_calls: bool) -> None:
        if tool_calls:  # its text was not the reply: the next call's replaces it
            self._round += 1
            self._text = ""

    # the end ---------------------------------------------------------------------------

    async def finish(self, text: str) -> list[SentMessage]:
        """Leave exactly ``text`` in the chat, cut in parts as any reply; raises
        DeliveryError when a part could not be sent."""
        await self._close()
        final = self._redact(text)
        message = self.template.model_copy(update={"text": final})
        if self.drafts or not self._messages:  # nothing to edit: sent as any reply
            return await self.pacer.send(message)
        parts = render_parts(final, self.limits)
        if not parts:  # a text that renders to nothing: sent as written, as any reply
            return await self.pacer.send(message)
        usable = len(self._messages) if self._broken_at is None else self._broken_at
        sent: list[SentMessage] = []
        fresh = min(usable, len(parts))
        for index, shown in enumerate(self._messages[:fresh]):
            part = parts[index]
            if shown.part.text != part.text:
                try:
                    await self.pacer.edit(self._edit(shown.message_id, part.source))
                except DeliveryError as exc:
                    log.warning(
                        "could not edit a streamed reply in %s (%s): sending the rest anew",
                        self.template.session_key,
                        exc.message,
                    )
                    fresh = usable = index
                    break
            sent.append(self._sent(shown.message_id))
        # the previews the reply needs no more go before the rest is sent: never two copies
        await self._take_back(range(fresh, len(self._messages)), editable=range(fresh, usable))
        for index, part in enumerate(parts[fresh:], start=fresh):
            update: dict[str, object] = {"text": part.source, **self._key(f"part{index}")}
            if index > 0:
                update["reply_to_message_id"] = None
            sent.extend(await self.pacer.send(message.model_copy(update=update)))
        return sent

    async def _take_back(
        self, indices: Iterable[int], *, editable: range, patience: float = math.inf
    ) -> None:
        """Delete the preview messages at ``indices``; one the platform will not delete is
        edited to :data:`SUPERSEDED` instead, if it is in ``editable`` (an edit of it was
        never refused)."""
        for index in indices:
            shown = self._messages[index]
            deletion = OutboundDeletion(
                channel=self.template.channel,
                chat_id=self.template.chat_id,
                thread_id=self.template.thread_id,
                message_id=shown.message_id,
                session_key=self.template.session_key,
                deliver=self.template.deliver,
            )
            try:
                await self.pacer.delete(deletion, patience=patience)
                continue
            except DeliveryError as exc:
                log.info("could not delete a preview in %s: %s", self.template.session_key, exc)
            if index in editable and shown.part.text != SUPERSEDED:
                with contextlib.suppress(DeliveryError):
                    edit = self._edit(shown.message_id, SUPERSEDED)
                    await self.pacer.edit(edit, patience=patience)

    async def stop(self) -> None:
        """The turn stopped before its reply: what was shown stays, marked as stopped; the
        messages after it (an earlier, longer round's) are taken back."""
        await self._close()
        try:
            if self.drafts:
                if self._draft:
                    shown_draft = self.template.model_copy(
                        update={"text": self._draft + STOPPED_MARK}
                    )
                    await self.pacer.send(shown_draft, patience=STOP_PATIENCE)
                return
            if not 0 <= self._latest < len(self._messages) or self._broken_at is not None:
                return
            shown = self._messages[self._latest]
            marked = render_parts(shown.part.source + STOPPED_MARK, self.limits)
            if len(marked) == 1:
                edit = self._edit(shown.message_id, marked[0].source)
                await self.pacer.edit(edit, patience=STOP_PATIENCE)
            else:  # the message is full: the mark follows it
                note = self.template.model_copy(
                    update={"text": STOPPED_MARK.strip(), "reply_to_message_id": None}
                )
                await self.pacer.send(note, patience=STOP_PATIENCE)
            after = range(self._latest + 1, len(self._messages))
            await self._take_back(after, editable=after, patience=STOP_PATIENCE)
        except DeliveryError as exc:
            log.info("could not mark a stopped reply in %s: %s", self.template.session_key, exc)

    async def close(self) -> None:
        """Stop showing text, leaving the chat as it is (the turn's end decides the rest)."""
        await self._close()

    async def _close(self) -> None:
        """No preview call after this returns: a call in flight ends first (cut short, the
        platform may have made a message whose id clawbot never learns)."""
        self._closed = True
        self._wake.set()
        task, self._task = self._task, None
        if task is None:
            return
        if not self._calling:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    # showing the newest text -----------------------------------------------------------

    async def _run(self) -> None:
        await self.pacer.clock.sleep(FIRST_PREVIEW_HOLD)  # ended by then: no preview at all
        while not self._closed:
            await self._wake.wait()
            self._wake.clear()
            while not self._closed and self._broken_at is None:
                step = self._next()
                if step is None:
                    break
                await self.pacer.until_ready(step.edits)
                step = self._next()  # the text may have grown meanwhile: show the newest
                if self._closed or step is None:
                    break
                self._calling = True
                try:
                    await self._show(step)
                except RateLimitedError:
                    continue  # dropped: the newest text goes once the chat is free
                except DeliveryError as exc:
                    log.warning(
                        "stopped streaming a reply in %s: %s", self.template.session_key, exc
                    )
                    self._broken_at = step.index
                finally:
                    self._calling = False

    def _next(self) -> _Step | None:
        text = _settled(self._text)
        if not text.strip():
            return None
        if self.drafts:
            return self._next_draft(text)
        if self._rendered[0] != text:
            self._rendered = (text, render_parts(self._redact(text), self.limits))
        parts = self._rendered[1]
        last = len(parts) - 1
        for index, part in enumerate(parts):
            if index >= len(self._messages):
                return _Step(index, part, None)
            shown = self._messages[index]
            if shown.round == self._round and (shown.done or shown.part.text == part.text):
                shown.done = shown.done or index < last
                continue
            if shown.part.text == part.text:  # an earlier round's message that shows it
                shown.round, shown.done = self._round, index < last
                continue
            return _Step(index, part, shown.message_id)
        return None

    def _next_draft(self, text: str) -> _Step | None:
        measure = utf16_length if self.limits.length_unit == "utf16" else len
        text = self._redact(text)
        if measure(text) > self.limits.max_message_chars:
            text = render_parts(text, self.limits)[-1].source  # the part being written
        if text == self._draft:
            return None
        part = RenderedPart(text=text, plain=text, markup="plain", source=text)
        return _Step(0, part, f"draft:{self._draft_id}")

    def _key(self, message: str) -> dict[str, object]:
        """A key of its own for each message this reply posts on its own (a preview, a part
        of the end): under the reply's key, a platform that keeps keys (Discord's nonce)
        would take a second message for the first one again."""
        key = self.template.idempotency_key
        return {"idempotency_key": f"{key}:{message}"} if key else {}

    async def _show(self, step: _Step) -> None:
        if self.drafts:
            await self.pacer.draft(self._draft_id, step.part.source)
            self._draft = step.part.source
        elif step.edits is None:
            first = step.index == 0
            update: dict[str, object] = {
                "text": step.part.source,
                **self._key(f"preview{self._round}.{step.index}"),
            }
            if not first:
                update["reply_to_message_id"] = None
            (sent, *_) = await self.pacer.preview(self.template.model_copy(update=update))
            if sent.message_id is None:
                raise DeliveryError(f"{self.template.channel} gave no id to edit the reply by")
            self._messages.append(_Shown(sent.message_id, step.part, self._round, False))
        else:
            await self.pacer.edit(self._edit(step.edits, step.part.source), retry=False)
            shown = self._messages[step.index]
            shown.part, shown.round, shown.done = step.part, self._round, False
        self._latest = step.index
        self.visible.set()

    def _edit(self, message_id: str, text: str) -> OutboundEdit:
        return OutboundEdit(
            channel=self.template.channel,
            chat_id=self.template.chat_id,
            thread_id=self.template.thread_id,
            message_id=message_id,
            text=text,
            session_key=self.template.session_key,
            deliver=self.template.deliver,
        )

    def _sent(self, message_id: str) -> SentMessage:
        return SentMessage(self.template.channel, self.template.chat_id, message_id)


def _settled(text: str) -> str:
    """``text`` without the word still being written (up to its last space or line
    break), and without a key block that has begun and not ended."""
    begun = text.rfind("-----BEGIN")
    if begun >= 0 and text.find("-----END", begun) < 0:
        text = text[:begun]
    cut = max(text.rfind(" "), text.rfind("\n"))
    return text[:cut] if cut > 0 else ""
