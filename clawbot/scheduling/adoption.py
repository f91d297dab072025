"""Picking up stored work of sessions this process owns but does not hold in memory, when
several processes share one database: a message another process stored and handed over, the
sessions of a dead process (its queued and interrupted jobs, backlog, held-back context and
replies it may not have sent), or what an earlier process left at start-up.

Work is read from the database, then placed in memory in one step without an await, and each
job placed is remembered: a job is never placed twice, even when a read raced a turn that had
already taken and finished it."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from clawbot.lru import LRUCache
from clawbot.messages import INTERNAL_CHANNEL
from clawbot.routing.sessions import Session
from clawbot.scheduling.backlog import BacklogItem
from clawbot.scheduling.jobs import TurnJob
from clawbot.scheduling.queues import SessionQueues
from clawbot.scheduling.recovery import Recovery
from clawbot.scheduling.session_state import SessionQueue
from clawbot.store import Store

log = logging.getLogger("clawbot.scheduler")

_REMEMBERED = 100_000
"""Job ids remembered as placed: far more than a process holds in memory at once."""


class Adopter:
    """Owned sessions' stored work into ``queues``; ``recovery`` gives up on jobs out of
    attempts and sends replies again as at start-up."""

    def __init__(self, *, store: Store, queues: SessionQueues, recovery: Recovery) -> None:
        self.store = store
        self.queues = queues
        self.recovery = recovery
        self._placed: LRUCache[str, bool] = LRUCache(_REMEMBERED)
        self._resent: LRUCache[str, bool] = LRUCache(_REMEMBERED)

    def placed(self, job_id: str) -> None:
        """A job this process placed in memory itself (a message it took in)."""
        self._placed.put(job_id, True)

    async def adopt(self, keys: Sequence[str] | None) -> None:
        """Place the stored work of ``keys`` (None: every owned session) not yet placed."""
        store = self.store
        unreplied: list[TurnJob] = []
        if keys is not None and len(keys) == 1:
            jobs = await store.jobs.open(keys[0])
            items = await store.backlog.items(keys[0])
            held = []
        else:
            jobs = await store.jobs.open()
            items = await store.backlog.items()
            held = await store.backlog.deferred_context()
            unreplied = [job for job in await store.jobs.unreplied() if job.owner != store.owner]
        wanted = (
            {job.session_key for job in jobs}
            | {stored.session_key for stored in items}
            | {context.session_key for context in held}
            | {job.session_key for job in unreplied}
        )
        if keys is not None:
            wanted &= set(keys)
        mine = await store.owners.owned(wanted)
        sessions = await self._sessions(mine)
        # From here to the end of placing, no await: what is placed is what was read.
        in_backlog = {stored.item.job_id for stored in items}
        touched: dict[str, tuple[SessionQueue, bool]] = {}
        out_of_attempts: list[TurnJob] = []

        def queue_of(key: str) -> SessionQueue | None:
            if key in touched:
                return touched[key][0]
            session = sessions.get(key)
            queue = self.queues.get(key) or (self.queues.queue(session) if session else None)
            if queue is None or queue.submitting:
                return None  # a message of its own is being stored: the next look takes it
            touched[key] = (queue, queue.idle())
            return queue

        for context in held:
            queue = queue_of(context.session_key) if context.session_key in mine else None
            if queue is not None and not self._seen(f"context:{context.row_id}"):
                queue.context.append((context.row_id, context.entry))
        for job in jobs:
            if job.session_key not in mine or job.merged_into is not None:
                continue
            if job.id in in_backlog or job.owner == store.owner:
                continue
            queue = queue_of(job.session_key)
            if queue is None or job.id in queue.holds() or self._seen(job.id):
                continue
            if job.status == "running" and job.attempts >= self.recovery.settings.job_max_attempts:
                out_of_attempts.append(job)
                continue
            queue.direct.append(job)
        for stored in items:
            queue = queue_of(stored.session_key) if stored.session_key in mine else None
            if queue is None or stored.item.job_id in queue.holds():
                continue
            if self._seen(stored.item.job_id):
                continue
            queue.backlog.append(_as_taken_in(stored.item, queue))
        for queue, was_idle in touched.values():
            if was_idle and queue.backlog and not queue.direct:
                # Messages handed over to an idle session run as themselves, as they would
                # have in the process that took them in, not as a [Backlog] summary.
                queue.handed_over = all(item.kind == "message" for item in queue.backlog)
            if queue.has_work() or queue.context:
                log.debug("session %s: picked up stored work", queue.key)
            self.queues.settle(queue)
        for job in out_of_attempts:
            await self.recovery.give_up(job)
        await self._resend([job for job in unreplied if job.session_key in mine])

    def _seen(self, job_id: str) -> bool:
        """Whether ``job_id`` was placed before; remembered as placed from now on."""
        if self._placed.get(job_id):
            return True
        self._placed.put(job_id, True)
        return False

    async def _sessions(self, keys: set[str]) -> dict[str, Session]:
        found: dict[str, Session] = {}
        for key in keys:
            queue = self.queues.get(key)
            session = queue.session if queue is not None else await self.store.sessions.get(key)
            if session is not None:
                found[key] = session
        return found

    async def _resend(self, jobs: list[TurnJob]) -> None:
        """Send again the replies of owned sessions that a dead owner stored but may not
        have sent."""
        for job in jobs:
            if self._resent.get(job.id):
                continue
            self._resent.put(job.id, True)
            await self.recovery.resend(job)


def _as_taken_in(item: BacklogItem, queue: SessionQueue) -> BacklogItem:
    """A stored item as the scheduler holds it: whether a message steers is not stored (it
    is the scheduler's rule: a person's message in the main lane)."""
    if item.kind != "message":
        return item
    steers = item.lane == "main" and queue.session.channel != INTERNAL_CHANNEL
    return item.model_copy(update={"steers": steers}) if steers != item.steers else item
