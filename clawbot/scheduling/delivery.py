"""What the scheduler sends (replies, notices, errors, typing indicators) and the marks that
record a reply went out, so a restart does not send it again."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Literal

from clawbot.channels.live_reply import LiveReply
from clawbot.channels.outbox import Delivery, Outbox
from clawbot.messages import OutboundMessage
from clawbot.routing.sessions import Session
from clawbot.scheduling.jobs import TurnJob
from clawbot.settings import Settings
from clawbot.store import Store

log = logging.getLogger("clawbot.scheduler")

TYPING_REFRESH_SECONDS = 4.0
REPLIED_FLUSH_SECONDS = 0.25

ReplyKind = Literal["reply", "notice", "error"]


class Replies:
    """Addresses a session's messages through the outbox (the only way out)."""

    def __init__(self, outbox: Outbox, settings: Settings | None = None) -> None:
        self.outbox = outbox
        self.settings = settings

    async def send(self, session: Session, text: str, job: TurnJob, *, kind: ReplyKind) -> Delivery:
        """Send ``job``'s one answer (a reply or a notice), keyed by the job: sent again by
        recovery, it carries the same idempotency key."""
        return await self.outbox.deliver(_addressed(session, text, job, kind))

    def live(self, session: Session, job: TurnJob) -> LiveReply | None:
        """A reply shown while it is written, where the settings and the channel allow one
        (never for an internal session or one that does not deliver: the outbox's gate)."""
        if self.settings is None or not self.settings.streams(session.channel):
            return None
        template = _addressed(session, "", job, "reply")
        return self.outbox.live_reply(template, chat_type=session.chat_type)

    async def finish(self, live: LiveReply, text: str) -> Delivery:
        """The reply a live one showed, as it ended: the chat shows exactly ``text``."""
        return await self.outbox.finish(live, text)

    def shows_typing(self, session: Session) -> bool:
        adapter = self.outbox.adapter(session.channel)
        return adapter is not None and adapter.supports_typing and session.deliver

    @contextlib.asynccontextmanager
    async def typing(
        self, session: Session, until: asyncio.Event | None = None
    ) -> AsyncIterator[None]:
        """A typing indicator, refreshed while the block runs, or ``until`` the event is
        set (the reply's first text is in the chat)."""

        async def refresh() -> None:
            while until is None or not until.is_set():
                await self.outbox.typing(session.channel, session.chat_id, session.thread_id)
                if until is None:
                    await asyncio.sleep(TYPING_REFRESH_SECONDS)
                else:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(until.wait(), TYPING_REFRESH_SECONDS)

        task = asyncio.create_task(refresh())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class ReplyMarks:
    """Reply marks ride along with the next transaction that happens anyway (a caller
    :meth:`take` s them into its write and gives them back if it fails), or are written
    shortly after when none does. ``loop`` is the scheduler's cached event loop; ``closing``
    says whether it is shutting down (then :meth:`close` writes what is left)."""

    def __init__(
        self,
        store: Store,
        *,
        loop: Callable[[], asyncio.AbstractEventLoop],
        closing: Callable[[], bool],
    ) -> None:
        self.store = store
        self._loop = loop
        self._closing = closing
        self._replied: list[str] = []
        self._flush: asyncio.TimerHandle | None = None
        self._flushing: asyncio.Task[None] | None = None

    def mark(self, job_id: str) -> None:
        """Meanwhile the intake journal holds a note of the mark, so a crash in between
        does not send the reply twice either."""
        self._replied.append(job_id)
        self.store.note_replied(job_id)
        if self._flush is None and not self._closing():
            self._flush = self._loop().call_later(REPLIED_FLUSH_SECONDS, self._start_flush)

    def take(self) -> list[str]:
        taken, self._replied = self._replied, []
        return taken

    def give_back(self, taken: list[str]) -> None:
        """Marks whose transaction failed wait for the next one: dropped, they would make
        the next start send those replies again (the store may be writable by then)."""
        self._replied[:0] = taken

    async def flush(self) -> None:
        replied = self.take()
        if replied:
            try:
                await self.store.jobs.mark_replied(replied)
            except BaseException:
                self.give_back(replied)
                raise

    async def close(self) -> None:
        """At shutdown: stop the timer, let a running write end, write the rest."""
        if self._flush is not None:
            self._flush.cancel()
        if self._flushing is not None:
            await asyncio.wait({self._flushing})
        await self.flush()

    def _start_flush(self) -> None:
        self._flush = None
        if self._replied and self._flushing is None:
            self._flushing = asyncio.create_task(self.flush())
            self._flushing.add_done_callback(self._flush_done)

    def _flush_done(self, task: asyncio.Task[None]) -> None:
        self._flushing = None
        if not task.cancelled() and task.exception() is not None:
            log.error("could not record sent replies (retried later): %s", task.exception())


def _addressed(session: Session, text: str, job: TurnJob, kind: ReplyKind) -> OutboundMessage:
    return OutboundMessage(
        channel=session.channel,
        chat_id=session.chat_id,
        thread_id=session.thread_id,
        text=text,
        reply_to_message_id=job.reply_to,  # DMs too: the adapter decides how to show it
        session_key=session.key,
        deliver=session.deliver,
        kind=kind,
        idempotency_key=job.id,
    )
