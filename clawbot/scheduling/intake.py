"""Taking a message in: stored with its TurnJob, then queued in its session (run now, or
waiting for a lane slot, or in the backlog of a busy session), or handed over to the process
that runs its session.

Taking a message in runs to its end even when whoever handed it in is cancelled meanwhile
(a subagent stopped while it announced, an adapter's task shut down): the database may have
taken the message already, and one it took must be queued in this process too, or it would
wait there unseen until a restart while the session's next messages wait behind it."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from clawbot.messages import INTERNAL_CHANNEL, TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.runtime.turn import Runtime
from clawbot.scheduling.adoption import Adopter
from clawbot.scheduling.backlog import BacklogItem
from clawbot.scheduling.context import ContextMessages
from clawbot.scheduling.delivery import ReplyMarks
from clawbot.scheduling.jobs import Lane, TurnJob
from clawbot.scheduling.outcomes import Outcomes
from clawbot.scheduling.placement import Placement
from clawbot.scheduling.queues import SessionQueues
from clawbot.scheduling.records import TurnHandle
from clawbot.scheduling.session_state import Run, SessionQueue
from clawbot.scheduling.turns import TurnRunner
from clawbot.store import Store, new_id
from clawbot.subagents.records import InjectionWrite

log = logging.getLogger("clawbot.scheduler")
Keys = tuple[str | None, InjectionWrite | None]
"""What makes a message's storing idempotent: its platform message id, or its injection."""
T = TypeVar("T")


class MessageIntake:
    """Stores and queues the messages :class:`~clawbot.scheduling.scheduler.Scheduler`
    takes, each as a task of its own that a cancelled caller leaves running."""

    def __init__(
        self,
        *,
        store: Store,
        runtime: Runtime,
        queues: SessionQueues,
        marks: ReplyMarks,
        outcomes: Outcomes,
        turns: TurnRunner,
        context: ContextMessages,
        placement: Placement,
        adopter: Adopter,
        closing: Callable[[], bool],
    ) -> None:
        self.store = store
        self.runtime = runtime
        self._queues = queues
        self._marks = marks
        self._outcomes = outcomes
        self._turns = turns
        self._context = context
        self._placement = placement
        self._adopter = adopter
        self._closing = closing
        self._running: set[asyncio.Task[Any]] = set()

    async def submit(
        self, session: Session, entry: TranscriptEntry, lane: Lane, reply_to: str | None, keys: Keys
    ) -> TurnHandle | None:
        """Store a message with its TurnJob and queue it (see ``Scheduler.submit``)."""
        return await self._whole(self._take(session, entry, lane, reply_to, keys))

    async def add_context(
        self, session: Session, entry: TranscriptEntry, dedup_id: str | None
    ) -> bool:
        """Store a message that starts no turn (see ``Scheduler.add_context``)."""
        return await self._whole(self._context.add(session, entry, dedup_id=dedup_id))

    async def drain(self) -> None:
        """Wait for the messages still being taken in (at shutdown, before the store
        closes)."""
        while self._running:
            await asyncio.wait(set(self._running))

    async def _whole(self, intake: Coroutine[Any, Any, T]) -> T:
        task = asyncio.ensure_future(intake)
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                task.add_done_callback(_log_failure)
            raise

    async def _take(
        self,
        session: Session,
        entry: TranscriptEntry,
        lane: Lane,
        reply_to: str | None,
        keys: Keys,
    ) -> TurnHandle | None:
        job_id = entry.turn_id
        if job_id is None:
            job_id = new_id("turn")
            entry = entry.model_copy(update={"turn_id": job_id})
        if self._placement.enabled:
            owner = await self._placement.owner_elsewhere(session.key)
            if owner is not None:
                job = TurnJob(id=job_id, session_key=session.key, lane=lane, reply_to=reply_to)
                write = functools.partial(self._write_item, session, keys)
                return await self._placement.hand_over(owner, session, job, entry, write)
        queue = self._queues.queue(session)
        if queue.idle():
            return await self._direct(queue, entry, job_id, lane, reply_to, keys)
        return await self._backlog(queue, entry, job_id, lane, reply_to, keys)

    async def _direct(
        self,
        queue: SessionQueue,
        entry: TranscriptEntry,
        job_id: str,
        lane: Lane,
        reply_to: str | None,
        keys: Keys,
    ) -> TurnHandle | None:
        queues = self._queues
        # Stored as started only once the model client is loaded: a process killed while it
        # loads (the first seconds of a start) had no chance at the turn, and a started job
        # counts an attempt. Until then the job waits queued, and its turn starts it.
        start_now = (
            queues.has_room(lane) and not queues.waiting(lane) and self.runtime.client.loaded()
        )
        job = TurnJob(
            id=job_id,
            session_key=queue.key,
            lane=lane,
            status="running" if start_now else "queued",
            attempts=1 if start_now else 0,
            owner=self.store.owner if start_now else None,
            lease_until=queues.lease_from_now() if start_now else None,
            reply_to=reply_to,
        )
        run: Run | None = None
        if start_now:
            # Claim the session and the slot before the first await: a message arriving
            # meanwhile sees a busy session and goes to the backlog.
            run = queues.new_run(queue, job, "message", slot=lane, mode="started", entries=[entry])
            queue.run = run
            queues.reserve(lane)
        else:
            queue.direct.append(job)
        replied = self._marks.take()
        queue.submitting += 1
        try:
            transcript = await self.runtime.transcripts.get(queue.session)
            fresh = await self._write(queue.session, job, keys, entry=entry, replied=replied)
        except BaseException:
            self._marks.give_back(replied)
            fresh = False
            raise
        finally:
            queue.submitting -= 1
            if not fresh:
                if run is not None:
                    queue.run = None
                    queues.unreserve(lane)
                else:
                    queue.direct.remove(job)
                queues.settle(queue)
        if not fresh:  # a redelivery wrote nothing: the marks ride with the next write
            self._marks.give_back(replied)
            return None
        transcript.append([entry])
        if self._placement.enabled:
            self._adopter.placed(job.id)
        handle = self._outcomes.handle_for(job)
        if run is None:
            queues.settle(queue)
        elif self._closing():
            queue.run = None
            queues.unreserve(lane)
            await self._turns.release_on_shutdown(run)
        else:
            self._turns.launch(run)
        return handle

    async def _backlog(
        self,
        queue: SessionQueue,
        entry: TranscriptEntry,
        job_id: str,
        lane: Lane,
        reply_to: str | None,
        keys: Keys,
    ) -> TurnHandle | None:
        steers = lane == "main" and queue.session.channel != INTERNAL_CHANNEL
        item = BacklogItem(
            kind="message", job_id=job_id, lane=lane, entry=entry, reply_to=reply_to, steers=steers
        )
        job = TurnJob(id=job_id, session_key=queue.key, lane=lane, reply_to=reply_to)
        replied = self._marks.take()
        queue.submitting += 1
        try:
            fresh = await self._write(queue.session, job, keys, item=item, replied=replied)
            if fresh:
                queue.backlog.append(item)
                if self._placement.enabled:
                    self._adopter.placed(job_id)
                if steers and queue.run is not None:
                    log.info("session %s: a new message steers the running turn", queue.key)
        except BaseException:
            self._marks.give_back(replied)
            raise
        finally:
            queue.submitting -= 1
            # The last submitter starts what waits, also when its own write was cut short
            # (a cancelled announce): else a message stored meanwhile would never run.
            self._queues.settle(queue)
        if not fresh:  # a redelivery wrote nothing: the marks ride with the next write
            self._marks.give_back(replied)
            return None
        return self._outcomes.handle_for(job)

    async def _write(
        self,
        session: Session,
        job: TurnJob,
        keys: Keys,
        *,
        entry: TranscriptEntry | None = None,
        item: BacklogItem | None = None,
        replied: list[str],
    ) -> bool:
        """An injected message is stored with its injection row; any other with its dedup
        ledger row (a platform message id)."""
        dedup_id, injection = keys
        if injection is not None:
            return await self.store.injections.submit(
                session, job, injection=injection, entry=entry, item=item, replied=replied
            )
        return await self.store.jobs.submit(
            session, job, entry=entry, item=item, dedup_id=dedup_id, replied=replied
        )

    async def _write_item(
        self, session: Session, keys: Keys, job: TurnJob, item: BacklogItem
    ) -> bool:
        return await self._write(session, job, keys, item=item, replied=[])


def _log_failure(task: asyncio.Task[Any]) -> None:
    """Its caller left, so no one else hears of it: a message not stored is redelivered by
    its platform (it was never acknowledged)."""
    if not task.cancelled() and (error := task.exception()) is not None:
        log.error("storing a message failed after its sender stopped waiting: %s", error)
