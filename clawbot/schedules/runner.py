"""The loop that runs due tasks: a turn plug-in (its ``start`` begins the loop, its ``stop``
ends it; its ``tools`` are the schedule tools).

Each due time runs once. Its claim is the dedup ledger row ``schedule:<task>:<due>``
written in the very transaction that stores the job (``Scheduler.submit``); only then does
the task move on to its next due time. A crash between the two finds the task still due at
that time after the restart, and the claim refuses a second job; a crash mid-run leaves a
job that recovery resumes. A task due while clawbot was down runs once at start, then at
its next time still ahead.

A run's outcome is counted when its turn ends (or, after a restart, before the task's next
run): after ``schedule_failures_to_pause`` failures in a row the task is paused and its
chat told.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from datetime import datetime

from clawbot.channels.outbox import Outbox
from clawbot.clock import Clock
from clawbot.errors import ShuttingDownError, SubagentError
from clawbot.messages import OutboundMessage, Provenance, TextBlock, TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.runtime.plugins import TurnPlugin
from clawbot.schedules.book import ScheduleBook
from clawbot.schedules.heartbeat import Heartbeat
from clawbot.schedules.records import ScheduledTask, due_key
from clawbot.schedules.tools import schedule_tools
from clawbot.schedules.when import Trigger
from clawbot.scheduling.records import TurnHandle
from clawbot.scheduling.scheduler import Scheduler
from clawbot.security.origin import TurnOrigin
from clawbot.settings import Settings
from clawbot.store import Store
from clawbot.subagents.control import SubagentControl
from clawbot.tools.registry import Tool

log = logging.getLogger("clawbot.schedules")

MAX_SLEEP = 60.0
"""The loop looks at the database at least this often (seconds), whatever woke it."""
RETRY_SECONDS = 5.0
"""After a round that failed (the database unavailable, say), the loop waits this long."""
SCHEDULE_META = "schedule"
"""The meta key of a scheduled run's prompt entry: the task's id."""


class ScheduleRunner(TurnPlugin):
    """Fires due tasks and heartbeats into the ``cron`` lane."""

    name = "schedules"

    def __init__(self, *, settings: Settings, store: Store, outbox: Outbox, clock: Clock) -> None:
        self.settings = settings
        self.store = store
        self.outbox = outbox
        self.clock = clock
        self._scheduler: Scheduler | None = None
        self.heartbeat: Heartbeat | None = None
        self.subagents: SubagentControl | None = None
        self.book = ScheduleBook(settings=settings, store=store, clock=clock, changed=self.wake)
        self._wake = asyncio.Event()
        self._tick_lock = asyncio.Lock()
        self._loop: asyncio.Task[None] | None = None
        self._watchers: set[asyncio.Task[None]] = set()

    def bind(
        self,
        scheduler: Scheduler,
        heartbeat: Heartbeat | None = None,
        subagents: SubagentControl | None = None,
    ) -> None:
        """The scheduler its runs go to and the subagents a ``subagent`` task's runs are
        (built after the runtime this plug-in is part of)."""
        self._scheduler = scheduler
        self.heartbeat = heartbeat
        self.subagents = subagents

    @property
    def scheduler(self) -> Scheduler:
        if self._scheduler is None:
            raise RuntimeError("ScheduleRunner.bind was not called")
        return self._scheduler

    def tools(self) -> Sequence[Tool]:
        return schedule_tools(self.book)

    async def start(self) -> None:
        self._loop = asyncio.create_task(self._run(), name="schedules")

    async def stop(self) -> None:
        for task in [*self._watchers, *([self._loop] if self._loop else [])]:
            task.cancel()
        for task in [*self._watchers, *([self._loop] if self._loop else [])]:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._loop = None

    async def counted(self) -> None:
        """Return once the outcomes of the runs that ended are counted."""
        while self._watchers:
            await asyncio.wait(set(self._watchers))

    def wake(self) -> None:
        """A task was created: look at the due times again now."""
        self._wake.set()

    async def tick(self) -> int:
        """Run every task due now, then the heartbeats due; how many runs were started.
        The loop calls it; tests call it directly with an injected clock."""
        async with self._tick_lock:
            now = self.clock.now()
            started = 0
            for task in await self.store.schedules.due(now):
                started += await self._fire(task, now)
            if self.heartbeat is not None:
                started += await self.heartbeat.tick(now)
            return started

    async def settle_unsettled(self) -> None:
        """Count the outcomes of runs that ended while no one watched (before a restart)."""
        for task in await self.store.schedules.unsettled():
            await self._settle_from_store(task)

    # the loop ------------------------------------------------------------------------------

    async def _run(self) -> None:
        await self.scheduler.wait_started()  # adapters connected, recovery done
        settled = False
        while True:
            delay: float | None = None
            try:
                if not settled:
                    await self.settle_unsettled()
                    settled = True
                await self.tick()
                self._wake.clear()
                delay = await self._delay()
            except ShuttingDownError:
                return
            except Exception:
                log.exception(
                    "scheduled tasks: a round failed (tried again in %.0f s)", RETRY_SECONDS
                )
            with contextlib.suppress(TimeoutError):
                # after a failure the due task is still due: wait, never spin on it
                await asyncio.wait_for(self._wake.wait(), RETRY_SECONDS if delay is None else delay)

    async def _delay(self) -> float:
        """Seconds until the soonest due time (a task or a heartbeat), at most MAX_SLEEP."""
        now = self.clock.now()
        soonest = [await self.store.schedules.next_due()]
        if self.heartbeat is not None:
            soonest.append(self.heartbeat.next_due(now))
        times = [t for t in soonest if t is not None]
        if not times:
            return MAX_SLEEP
        return min(MAX_SLEEP, max(0.0, (min(times) - now).total_seconds()))

    # a run -----------------------------------------------------------------------------

    async def _fire(self, task: ScheduledTask, now: datetime) -> int:
        due = task.next_run
        assert due is not None  # due() returns active tasks with a next run only
        if task.last_job is not None:
            settled = await self._settle_from_store(task)
            if settled is not None and settled.status != "active":
                return 0
        session = await self.store.sessions.get(task.session_key)
        if session is None:  # its conversation was deleted
            await self.store.schedules.cancel(task.id)
            return 0
        following = Trigger(task.kind, task.spec, task.tz).next_after(due, now)
        if task.mode == "subagent":
            return await self._fire_subagent(task, session, due, following)
        entry = TranscriptEntry(
            role="user",
            content=(TextBlock(text=f"[Scheduled task {task.id}]\n{task.prompt}"),),
            provenance=Provenance(
                channel=session.channel, sender_id=task.created_by, source="system"
            ),
            meta={SCHEDULE_META: task.id},
        )
        handle = await self.scheduler.submit(
            session, entry, lane="cron", dedup_id=due_key(task.id, due)
        )
        job_id = handle.job_id if handle is not None else None
        if not await self.store.schedules.advance(task.id, due, following, job_id):
            return 0
        if handle is None:  # an earlier process claimed this due time and started its job
            log.info("scheduled task %s: the run due at %s was started before", task.id, due)
            return 0
        log.info("scheduled task %s: runs (job %s) in %s", task.id, handle.job_id, session.key)
        self._watch(task.id, handle)
        return 1

    async def _fire_subagent(
        self, task: ScheduledTask, session: Session, due: datetime, following: datetime | None
    ) -> int:
        """Spawn a fresh subagent of ``session`` (the task's agent) with the prompt as its
        task; its announce reaches the session. The spawn is named by the due time, so a
        second attempt at one due time finds the child made by the first."""
        if self.subagents is None:
            raise RuntimeError("ScheduleRunner.bind was not given the subagents")
        claim = due_key(task.id, due)
        try:
            spawned = await self.subagents.spawn(
                session,
                task.prompt,
                TurnOrigin.of(session, claim, ()),
                agent=task.agent_id,
                label=f"scheduled: {task.prompt}",
                turn_id=claim,
            )
        except SubagentError as exc:
            log.warning("scheduled task %s: its subagent was refused: %s", task.id, exc)
            if await self.store.schedules.advance(task.id, due, following, None):
                await self._settle(task.id, None, failed=True)
            return 0
        jobs = await self.store.jobs.for_session(spawned.key)
        job_id = jobs[0].id if jobs else None
        if not await self.store.schedules.advance(task.id, due, following, job_id):
            return 0
        log.info("scheduled task %s: runs in subagent %s", task.id, spawned.key)
        return 1

    def _watch(self, task_id: str, handle: TurnHandle) -> None:
        watcher = asyncio.create_task(self._watched(task_id, handle))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)

    async def _watched(self, task_id: str, handle: TurnHandle) -> None:
        outcome = await handle.outcome()
        if outcome.status == "deferred":  # shutting down: counted after the restart
            return
        # a run a spent budget refused is no fault of the task's: it runs again once the
        # budget allows (the next day), instead of being paused after a few such runs
        refused = outcome.result is not None and outcome.result.refused_by is not None
        await self._settle(
            task_id, handle.job_id, failed=outcome.status == "failed", refused=refused
        )

    async def _settle_from_store(self, task: ScheduledTask) -> ScheduledTask | None:
        assert task.last_job is not None
        job = await self.store.jobs.get(task.last_job)
        if job is None or job.status in ("done", "failed", "cancelled"):
            failed = job is not None and job.status == "failed"
            return await self._settle(task.id, task.last_job, failed=failed)
        return None  # still queued or running: counted when it ends

    async def _settle(
        self, task_id: str, job_id: str | None, *, failed: bool, refused: bool = False
    ) -> ScheduledTask | None:
        limit = self.settings.schedule_failures_to_pause
        task = await self.store.schedules.settle(
            task_id, job_id, failed=failed, pause_after=limit, refused=refused
        )
        if task is not None and task.status == "paused" and failed and task.failures == limit:
            await self._tell_paused(task)
        return task

    async def _tell_paused(self, task: ScheduledTask) -> None:
        log.warning("scheduled task %s paused after %d failed runs", task.id, task.failures)
        session = await self.store.sessions.get(task.session_key)
        if session is None:
            return
        await self.outbox.deliver(paused_notice(session, task))


def paused_notice(session: Session, task: ScheduledTask) -> OutboundMessage:
    """The chat's word that its task stopped running: which, why, what to do."""
    prompt = " ".join(task.prompt.split())[:80]
    return session.notice(
        f"Scheduled task {task.id} ({prompt!r}) is paused: its last {task.failures} runs "
        f"failed. Cancel it with /schedule cancel {task.id} and add it again once the cause "
        "is fixed.",
        idempotency_key=f"schedule-paused:{task.id}:{task.failures}",
    )
