"""Taking over what a dead process left: at start-up its queued jobs, backlog and held-back
context; at start-up and periodically, jobs whose owner died (resumed from the transcript,
or failed with a note after ``job_max_attempts``); and replies it stored but may not have
sent."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Awaitable, Callable
from datetime import datetime

from clawbot.clock import Clock
from clawbot.runtime.control import EMPTY_REPLY
from clawbot.scheduling.delivery import Replies, ReplyKind, ReplyMarks
from clawbot.scheduling.jobs import TurnJob
from clawbot.scheduling.notices import GAVE_UP_ERROR, asked_of, failure_notice, gave_up_notice
from clawbot.scheduling.queues import SessionQueues
from clawbot.scheduling.session_state import SessionQueue
from clawbot.settings import Settings
from clawbot.store import Store

log = logging.getLogger("clawbot.scheduler")


class Recovery:
    """``record_context`` writes a session's held-back context messages."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        clock: Clock,
        queues: SessionQueues,
        replies: Replies,
        marks: ReplyMarks,
        record_context: Callable[[SessionQueue], Awaitable[None]],
    ) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.queues = queues
        self.replies = replies
        self.marks = marks
        self._record_context = record_context

    async def recover(self, *, startup: bool) -> None:
        """Take over jobs whose owner died (and, at start-up, all queued work and backlog)."""
        if startup:
            for held in await self.store.backlog.deferred_context():
                queue = await self._queue_for_key(held.session_key)
                if queue is not None:
                    queue.context.append((held.row_id, held.entry))
            for queue in self.queues.queues():
                await self._record_context(queue)
                self.queues.settle(queue)  # forgotten unless it has work: memory stays bounded
        jobs = await self.store.jobs.open()
        items = await self.store.backlog.items() if startup else []
        in_backlog = {stored.item.job_id for stored in items}
        running_here = {run.job.id for run in self.queues.runs()}
        now = self.clock.now()
        touched: dict[str, SessionQueue] = {}
        for job in jobs:
            if job.merged_into is not None or job.id in running_here:
                continue
            if job.status == "running":
                if job.owner == self.store.owner or not orphaned(job, now):
                    continue
                if job.attempts >= self.settings.job_max_attempts:
                    await self.give_up(job)
                    continue
            elif not startup or job.id in in_backlog:
                continue
            queue = await self._queue_for_key(job.session_key)
            if queue is not None and all(j.id != job.id for j in queue.direct):
                queue.direct.append(job)
                touched[queue.key] = queue
        for stored in items:
            queue = await self._queue_for_key(stored.session_key)
            if queue is not None:
                queue.backlog.append(stored.item)
                touched[queue.key] = queue
        for queue in touched.values():
            log.info(
                "session %s: recovered %d job(s) and %d backlog item(s)",
                queue.key,
                len(queue.direct),
                len(queue.backlog),
            )
            self.queues.settle(queue)

    async def redeliver(self) -> None:
        """Send again replies a crashed process stored but may not have sent."""
        now = self.clock.now()
        for job in await self.store.jobs.unreplied():
            if job.owner == self.store.owner or not orphaned(job, now):
                continue
            await self.resend(job)

    async def resend(self, job: TurnJob) -> None:
        """Send a finished job's stored reply (or its failure notice) again and mark it
        sent."""
        session = await self.store.sessions.get(job.session_key)
        if session is None:
            return
        if job.status == "done":
            text = await self.store.jobs.reply_text(job.id) or EMPTY_REPLY
        else:
            text = await self._failure_text(job)
        log.info("session %s: sending the reply of job %s again", session.key, job.id)
        kind: ReplyKind = "reply" if job.status == "done" else "error"
        await self.replies.send(session, text, job, kind=kind)
        self.marks.mark(job.id)

    async def _failure_text(self, job: TurnJob) -> str:
        """The notice of a failed job a crash may have kept from going out, quoting what
        it answers as the notice it stands for did."""
        asked = await asked_of(self.store, job.session_key, job.id)
        if job.error is not None and job.error.startswith(GAVE_UP_ERROR):
            return gave_up_notice(asked, job.attempts)
        return failure_notice(asked, job.error)

    async def _queue_for_key(self, key: str) -> SessionQueue | None:
        queue = self.queues.get(key)
        if queue is not None:
            return queue
        session = await self.store.sessions.get(key)
        return self.queues.queue(session) if session is not None else None

    async def give_up(self, job: TurnJob) -> None:
        """Fail a job out of attempts, telling the person which messages to send again. The
        job stays unreplied until the notice is sent: a crash in between sends it at the
        next start."""
        log.error("job %s failed: %d attempts, each interrupted", job.id, job.attempts)
        asked = await asked_of(self.store, job.session_key, job.id)
        await self.store.jobs.close(
            [job.id],
            "failed",
            f"{GAVE_UP_ERROR}{job.attempts} interrupted attempts",
            notice_of=job.id,
        )
        session = await self.store.sessions.get(job.session_key)
        if session is not None:
            text = gave_up_notice(asked, job.attempts)
            await self.replies.send(session, text, job, kind="error")
        self.marks.mark(job.id)


_HOST = socket.gethostname()


def orphaned(job: TurnJob, now: datetime) -> bool:
    """A job's owner is gone: its lease expired, or it was a process on this machine that no
    longer exists (so a restart after a crash need not wait for the lease)."""
    if job.lease_until is None or job.lease_until <= now or job.owner is None:
        return True
    host, _, rest = job.owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != _HOST or not pid_text.isdigit() or int(pid_text) == os.getpid():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False
