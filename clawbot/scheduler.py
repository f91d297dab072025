"""The scheduler: every turn is a persisted TurnJob that runs in a lane.

Rules, each enforced here:

- Lanes ``main``, ``subagent``, ``cron`` and ``announce`` each have a concurrency limit, and
  all lanes together a global one. A session never has more than ONE active turn.
- Steer-backlog: a message for a session whose turn is in flight goes to the session's
  backlog; a person's message makes the running turn yield at its next safe tool boundary
  (the runtime asks :class:`TurnControl`), the interrupted task's resume token joins the
  backlog and the new message runs next. Without a boundary the message waits (backlog-only).
  A turn that does not follow a steer drains the whole backlog into ONE ``[Backlog]`` message.
  Internal announce traffic waits in the backlog and never steers.
- Nothing lost: a message is stored with its job before :meth:`Scheduler.submit` returns.
  A running job holds a lease (written with the job, renewed only for long turns); at start
  jobs whose owner died are resumed from the transcript, or failed with a note after
  ``job_max_attempts``. A reply that may not have gone out before a crash is sent again.
- Nothing stuck: a turn past ``turn_deadline`` is cancelled and the user told; the watchdog
  logs turns held longer than ``turn_watchdog``; ``/stop`` cancels a turn at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from clawbot.backlog import BacklogItem, ResumeStep, merge_backlog, resume_token, task_of
from clawbot.clock import Clock, SystemClock, human_duration
from clawbot.errors import LeaseLostError, ShuttingDownError, StoreError
from clawbot.jobs import LANES, Lane, TurnJob
from clawbot.messages import INTERNAL_CHANNEL, OutboundMessage, TranscriptEntry
from clawbot.outbox import Delivery, Outbox
from clawbot.runtime import EMPTY_REPLY, Runtime, TurnControl, TurnResult
from clawbot.sessions import Session
from clawbot.settings import Settings
from clawbot.store import Store, new_id

log = logging.getLogger("clawbot.scheduler")

TYPING_REFRESH_SECONDS = 4.0
REPLIED_FLUSH_SECONDS = 0.25
SEEN_RETENTION = timedelta(days=7)
"""How long a platform message id stays in the dedup ledger (redeliveries come within hours)."""
SEEN_FORGET_EVERY = 24 * 3600.0
"""Seconds between two passes that forget ledger ids older than SEEN_RETENTION."""
NOT_RUN_SHUTDOWN = "not run: clawbot is restarting; resumes from the backlog"

RunKind = Literal["message", "steered", "backlog", "recovered"]
OutcomeStatus = Literal["done", "failed", "cancelled", "deferred"]


@dataclass(frozen=True)
class TurnOutcome:
    """How the turn carrying a job ended. ``deferred``: the process is shutting down and the
    job resumes after the restart (or another process took it over)."""

    job_id: str
    status: OutcomeStatus
    reply: str | None = None
    delivery: Delivery | None = None
    result: TurnResult | None = None


@dataclass(frozen=True)
class TurnHandle:
    """A stored, queued message: its job, and the outcome of the turn that answers it."""

    job_id: str
    session_key: str
    lane: Lane
    future: asyncio.Future[TurnOutcome] = field(repr=False, compare=False)

    async def outcome(self) -> TurnOutcome:
        return await self.future


@dataclass(frozen=True)
class ActiveTurn:
    job_id: str
    lane: Lane
    kind: RunKind
    seconds: float


@dataclass(frozen=True)
class QueueState:
    """A session's scheduling state, for ``/queue``."""

    session_key: str
    active: ActiveTurn | None
    backlog: tuple[BacklogItem, ...]
    queued: int
    waiting_lane: Lane | None


@dataclass(frozen=True)
class StopReport:
    """What ``/stop`` did: the turn it cancelled, resume tokens dropped, messages still due."""

    stopped: str | None
    dropped: int
    waiting: int


@dataclass
class _SessionQueue:
    session: Session
    direct: deque[TurnJob] = field(default_factory=deque)
    backlog: list[BacklogItem] = field(default_factory=list)
    run: _Run | None = None
    ready_lane: Lane | None = None
    submitting: int = 0
    steered: bool = False
    context: list[tuple[int, TranscriptEntry]] = field(default_factory=list)
    recording: bool = False

    @property
    def key(self) -> str:
        return self.session.key

    @property
    def steering(self) -> bool:
        return any(item.steers for item in self.backlog)

    def has_work(self) -> bool:
        return bool(self.direct or self.backlog)

    def idle(self) -> bool:
        return (
            self.run is None
            and not self.direct
            and not self.backlog
            and not self.submitting
            and not self.context
        )

    def next_lane(self) -> Lane:
        if self.direct:
            return self.direct[0].lane
        return _runner_item(self.backlog).lane


class _Run(TurnControl):
    """One turn in flight; also the runtime's TurnControl for it."""

    def __init__(
        self,
        scheduler: Scheduler,
        queue: _SessionQueue,
        job: TurnJob,
        kind: RunKind,
        *,
        slot: Lane,
        entries: Sequence[TranscriptEntry] = (),
        carried: Sequence[str] = (),
        task_text: str | None = None,
        steps: tuple[ResumeStep, ...] = (),
        mode: Literal["start", "claim", "started"] = "start",
    ) -> None:
        self.scheduler = scheduler
        self.queue = queue
        self.job = job
        self.kind = kind
        self.slot = slot
        self.entries = tuple(entries)
        self.carried = tuple(carried)
        self.task_text = task_text
        self.steps = steps
        self.mode = mode
        self.started = scheduler.clock.monotonic()
        self.lease_until = job.lease_until or scheduler.lease_from_now()
        self.task: asyncio.Task[None] | None = None
        self.cancel_reason: Literal["stop", "shutdown", "deadline"] | None = None
        self.warned_at: float | None = None

    def should_yield(self) -> bool:
        return self.scheduler.closing or self.queue.steering

    def not_run_note(self) -> str:
        return super().not_run_note() if self.queue.steering else NOT_RUN_SHUTDOWN


class Scheduler:
    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        runtime: Runtime,
        outbox: Outbox,
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.runtime = runtime
        self.outbox = outbox
        self.clock: Clock = clock or SystemClock()
        self.limits: dict[Lane, int] = {
            "main": settings.lane_main,
            "subagent": settings.lane_subagent,
            "cron": settings.lane_cron,
            "announce": settings.lane_announce,
        }
        self.active: dict[Lane, int] = dict.fromkeys(LANES, 0)
        self.active_total = 0
        self.closing = False
        self._started = False
        self._start_lock = asyncio.Lock()
        self._queues: dict[str, _SessionQueue] = {}
        self._ready: dict[Lane, deque[str]] = {lane: deque() for lane in LANES}
        self._waiters: dict[str, list[asyncio.Future[TurnOutcome]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._replied: list[str] = []
        self._unclosed: list[list[str]] = []  # failed jobs the store could not close yet
        self._flush: asyncio.TimerHandle | None = None
        self._flushing: asyncio.Task[None] | None = None
        self._housekeeping: asyncio.Task[None] | None = None
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._forgot_seen_at: float | None = None  # monotonic time of the last ledger pass

    # life cycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Recover what a previous process left (orphaned jobs, the backlog, replies that
        may not have gone out), then start housekeeping. Call it once the adapters are
        connected: recovered turns reply through them. Idempotent."""
        async with self._start_lock:
            if self._started:
                return
            await self._recover(startup=True)
            await self._redeliver()
            self._housekeeping = asyncio.create_task(self._housekeep())
            self._started = True

    async def shutdown(self, timeout: float | None = None) -> None:
        """Stop intake, give running turns ``timeout`` seconds (default: the
        ``shutdown_timeout`` setting) to finish or reach a tool boundary (where they yield a
        resume token), then cancel the rest and leave them queued to resume on the next
        start. Queued work and the backlog are already stored. Idempotent."""
        if self.closing:
            return
        self.closing = True
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._housekeeping
        wait = self.settings.shutdown_timeout if timeout is None else timeout
        tasks = set(self._tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=wait)
            for queue in self._queues.values():
                run = queue.run
                if run is not None and run.task in pending and run.cancel_reason is None:
                    run.cancel_reason = "shutdown"
                    run.task.cancel()
            if pending:
                await asyncio.wait(pending)
        if self._flush is not None:
            self._flush.cancel()
        if self._flushing is not None:
            await asyncio.wait({self._flushing})
        await self._flush_replied()
        for job_id in list(self._waiters):
            self._resolve(job_id, TurnOutcome(job_id=job_id, status="deferred"))
        self._wake_idle()

    async def wait_idle(self) -> None:
        """Return once no turn runs and nothing waits (``clawbot chat`` at end of input)."""
        while not self._is_idle() and not self.closing:
            waiter = asyncio.get_running_loop().create_future()
            self._idle_waiters.append(waiter)
            await waiter

    def lease_from_now(self) -> datetime:
        return self.clock.now() + timedelta(seconds=self.settings.job_lease)

    # intake ----------------------------------------------------------------------------

    async def submit(
        self,
        session: Session,
        entry: TranscriptEntry,
        *,
        lane: Lane = "main",
        reply_to: str | None = None,
        dedup_id: str | None = None,
    ) -> TurnHandle | None:
        """Store a message with its TurnJob and queue it; None for a redelivered message.

        Returns once the message is durable: an adapter acknowledges the platform after
        this. An idle session's message enters the transcript and runs (or waits for a lane
        slot); a busy session's message waits in its backlog and, unless it is internal
        announce traffic, steers the running turn."""
        if self.closing:
            raise ShuttingDownError("clawbot is shutting down and did not take this message")
        if not self._started:
            await self.start()
        queue = self._queue(session)
        job_id = entry.turn_id
        if job_id is None:
            job_id = new_id("turn")
            entry = entry.model_copy(update={"turn_id": job_id})
        if queue.idle():
            return await self._submit_direct(queue, entry, job_id, lane, reply_to, dedup_id)
        return await self._submit_backlog(queue, entry, job_id, lane, reply_to, dedup_id)

    async def _submit_direct(
        self,
        queue: _SessionQueue,
        entry: TranscriptEntry,
        job_id: str,
        lane: Lane,
        reply_to: str | None,
        dedup_id: str | None,
    ) -> TurnHandle | None:
        start_now = self._has_room(lane) and not self._ready[lane]
        job = TurnJob(
            id=job_id,
            session_key=queue.key,
            lane=lane,
            status="running" if start_now else "queued",
            attempts=1 if start_now else 0,
            owner=self.store.owner if start_now else None,
            lease_until=self.lease_from_now() if start_now else None,
            reply_to=reply_to,
        )
        run: _Run | None = None
        if start_now:
            # Claim the session and the slot before the first await: a message arriving
            # meanwhile sees a busy session and goes to the backlog.
            run = _Run(self, queue, job, "message", slot=lane, mode="started")
            queue.run = run
            self._reserve(lane)
        else:
            queue.direct.append(job)
        replied = self._take_replied()
        queue.submitting += 1
        try:
            transcript = await self.runtime.transcripts.get(queue.session)
            fresh = await self.store.submit_job(
                queue.session, job, entry=entry, dedup_id=dedup_id, replied=replied
            )
        except BaseException:
            self._give_back_replied(replied)
            fresh = False
            raise
        finally:
            queue.submitting -= 1
            if not fresh:
                if run is not None:
                    queue.run = None
                    self._unreserve(lane)
                else:
                    queue.direct.remove(job)
                self._settle(queue)
        if not fresh:
            return None
        transcript.append([entry])
        handle = self._handle_for(job)
        if run is None:
            self._settle(queue)
        elif self.closing:
            queue.run = None
            self._unreserve(lane)
            await self._release_on_shutdown(run)
        else:
            self._launch(run)
        return handle

    async def _submit_backlog(
        self,
        queue: _SessionQueue,
        entry: TranscriptEntry,
        job_id: str,
        lane: Lane,
        reply_to: str | None,
        dedup_id: str | None,
    ) -> TurnHandle | None:
        steers = lane == "main" and queue.session.channel != INTERNAL_CHANNEL
        item = BacklogItem(
            kind="message", job_id=job_id, lane=lane, entry=entry, reply_to=reply_to, steers=steers
        )
        job = TurnJob(id=job_id, session_key=queue.key, lane=lane, reply_to=reply_to)
        replied = self._take_replied()
        queue.submitting += 1
        try:
            fresh = await self.store.submit_job(
                queue.session, job, item=item, dedup_id=dedup_id, replied=replied
            )
        except BaseException:
            self._give_back_replied(replied)
            raise
        finally:
            queue.submitting -= 1
        if fresh:
            queue.backlog.append(item)
            if steers and queue.run is not None:
                log.info("session %s: a new message steers the running turn", queue.key)
        self._settle(queue)
        return self._handle_for(job) if fresh else None

    async def add_context(
        self, session: Session, entry: TranscriptEntry, *, dedup_id: str | None = None
    ) -> bool:
        """Store a message that starts no turn (group chatter kept as context), in order
        with the session's turns: at once when no turn runs, else held back (durably) until
        the running turn ends. False for a redelivered message."""
        queue = self._queue(session)
        queue.submitting += 1
        try:
            if queue.run is None and not queue.context:
                transcript = await self.runtime.transcripts.get(session)
                stored = await self.store.append_context(session, entry, dedup_id=dedup_id)
                if stored:
                    transcript.append([entry])
            else:
                row = await self.store.defer_context(session, entry, dedup_id=dedup_id)
                stored = row is not None
                if row is not None:
                    queue.context.append((row, entry))
        finally:
            queue.submitting -= 1
        if queue.run is None and queue.context:
            await self._record_context(queue)
        self._settle(queue)
        return stored

    async def _record_context(self, queue: _SessionQueue) -> None:
        """Write held-back context messages into the transcript (after the turn they
        arrived during, before the next one)."""
        if queue.recording:
            return
        queue.recording = True
        try:
            while queue.context:
                batch = list(queue.context)
                transcript = await self.runtime.transcripts.get(queue.session)
                await self.store.record_context(
                    queue.session, [row for row, _ in batch], [entry for _, entry in batch]
                )
                del queue.context[: len(batch)]
                transcript.append(entry for _, entry in batch)
        finally:
            queue.recording = False

    def refresh(self, session: Session) -> None:
        """The router changed a session (agent, model, /new): later turns use the change."""
        queue = self._queues.get(session.key)
        if queue is not None:
            queue.session = session

    # control ---------------------------------------------------------------------------

    def queue_state(self, session_key: str) -> QueueState:
        queue = self._queues.get(session_key)
        if queue is None:
            return QueueState(session_key, None, (), 0, None)
        run = queue.run
        active = (
            ActiveTurn(
                job_id=run.job.id,
                lane=run.slot,
                kind=run.kind,
                seconds=self.clock.monotonic() - run.started,
            )
            if run is not None
            else None
        )
        return QueueState(
            session_key=session_key,
            active=active,
            backlog=tuple(queue.backlog),
            queued=len(queue.direct),
            waiting_lane=queue.ready_lane,
        )

    async def stop(self, session_key: str) -> StopReport:
        """Cancel the session's active turn at once and drop the interrupted work waiting in
        its backlog; messages still waiting are answered as usual."""
        queue = self._queues.get(session_key)
        if queue is None:
            return StopReport(stopped=None, dropped=0, waiting=0)
        resumes = [item for item in queue.backlog if item.kind == "resume"]
        queue.backlog = [item for item in queue.backlog if item.kind != "resume"]
        if resumes:
            dropped = [item.job_id for item in resumes]
            await self.store.close_jobs(dropped, "cancelled", "dropped by /stop")
            for job_id in dropped:
                self._resolve(job_id, TurnOutcome(job_id=job_id, status="cancelled"))
        waiting = len(queue.direct) + sum(1 for item in queue.backlog if item.kind == "message")
        run = queue.run
        if run is not None:
            if run.cancel_reason is None and run.task is not None:
                run.cancel_reason = "stop"
                run.task.cancel()
            if run.task is not None:
                await asyncio.wait({run.task})
        self._settle(queue)
        return StopReport(
            stopped=run.job.id if run is not None else None, dropped=len(resumes), waiting=waiting
        )

    # housekeeping ----------------------------------------------------------------------

    async def tick(self) -> None:
        """One round of housekeeping (a background task calls it; tests call it directly):
        store journalled messages, renew the leases of long turns, log turns held too long,
        write reply marks, close failed jobs the store refused before, take over jobs whose
        owner's lease expired and, once a day, forget old message ids."""
        # Journalled messages become rows other processes can see within one interval at
        # the latest, well inside their jobs' leases; a dead peer's journal is stored.
        await self.store.flush()
        await self.store.recover_intakes()
        now = self.clock.now()
        lease = timedelta(seconds=self.settings.job_lease)
        runs = [queue.run for queue in self._queues.values() if queue.run is not None]
        due = [run for run in runs if run.lease_until - now <= lease * 2 / 3]
        if due:
            until = now + lease
            await self.store.renew_leases([run.job.id for run in due], until)
            for run in due:
                run.lease_until = until
        monotonic = self.clock.monotonic()
        limit = self.settings.turn_watchdog
        for run in runs:
            held = monotonic - run.started
            if held >= limit and (run.warned_at is None or monotonic - run.warned_at >= limit):
                run.warned_at = monotonic
                log.warning(
                    "watchdog: session %s has held its turn for %s (job %s, %s lane)",
                    run.queue.key,
                    human_duration(held),
                    run.job.id,
                    run.slot,
                )
        await self._flush_replied()
        await self._close_unclosed()
        await self._recover(startup=False)
        if self._forgot_seen_at is None or monotonic - self._forgot_seen_at >= SEEN_FORGET_EVERY:
            self._forgot_seen_at = monotonic
            forgotten = await self.store.forget_seen(SEEN_RETENTION)
            if forgotten:
                log.info(
                    "forgot %d platform message ids older than %d days",
                    forgotten,
                    SEEN_RETENTION.days,
                )

    async def _housekeep(self) -> None:
        interval = min(self.settings.job_lease / 3, self.settings.turn_watchdog / 2, 10.0)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.tick()
            except Exception:
                log.exception("scheduler housekeeping failed; retrying in %.0f s", interval)

    # dispatch --------------------------------------------------------------------------

    def _queue(self, session: Session) -> _SessionQueue:
        queue = self._queues.get(session.key)
        if queue is None:
            queue = self._queues[session.key] = _SessionQueue(session)
        else:
            queue.session = session
        return queue

    def _has_room(self, lane: Lane) -> bool:
        return (
            self.active[lane] < self.limits[lane]
            and self.active_total < self.settings.max_active_turns
        )

    def _reserve(self, lane: Lane) -> None:
        self.active[lane] += 1
        self.active_total += 1

    def _unreserve(self, lane: Lane) -> None:
        self.active[lane] -= 1
        self.active_total -= 1

    def _settle(self, queue: _SessionQueue) -> None:
        """After any change to a session: queue its next turn, or forget it when idle.

        A session with a message still being stored waits: its last submitter settles it,
        so no turn starts on input that is not in the database yet."""
        if (
            queue.run is None
            and queue.ready_lane is None
            and not queue.submitting
            and queue.has_work()
        ):
            if not self.closing:
                lane = queue.next_lane()
                queue.ready_lane = lane
                self._ready[lane].append(queue.key)
                self._pump()
        elif queue.idle() and self._queues.get(queue.key) is queue:
            del self._queues[queue.key]
        if self._idle_waiters:
            self._wake_idle()

    def _pump(self) -> None:
        """Start queued turns while their lanes and the global limit have room."""
        if self.closing:
            return
        for lane in LANES:
            ready = self._ready[lane]
            while ready and self._has_room(lane):
                queue = self._queues.get(ready.popleft())
                if queue is None or queue.ready_lane != lane:
                    continue
                queue.ready_lane = None
                if queue.run is not None or not queue.has_work():
                    continue
                run = self._plan(queue, lane)
                queue.run = run
                self._reserve(lane)
                self._launch(run)

    def _plan(self, queue: _SessionQueue, slot: Lane) -> _Run:
        """The session's next turn: a job whose input is in the transcript already, else the
        messages that steered the last turn, else the whole backlog as one message."""
        if queue.direct:
            job = queue.direct.popleft()
            if job.status == "running":
                return _Run(self, queue, job, "recovered", slot=slot, mode="claim")
            return _Run(self, queue, job, "message", slot=slot)
        steered = queue.steered and queue.steering
        queue.steered = False
        if steered:
            items = [i for i in queue.backlog if i.kind == "message" and i.steers]
        else:
            items = list(queue.backlog)
        taken = {id(item) for item in items}
        queue.backlog = [item for item in queue.backlog if id(item) not in taken]
        runner = items[0] if steered else _runner_item(items)
        carried = [item.job_id for item in items if item is not runner]
        for job_id in carried:
            self._waiters.setdefault(runner.job_id, []).extend(self._waiters.pop(job_id, []))
        reply_to = next((i.reply_to for i in reversed(items) if i.reply_to), runner.reply_to)
        job = TurnJob(id=runner.job_id, session_key=queue.key, lane=runner.lane, reply_to=reply_to)
        if steered:
            entries = [
                item.entry.model_copy(update={"turn_id": runner.job_id})
                for item in items
                if item.entry is not None
            ]
            return _Run(self, queue, job, "steered", slot=slot, entries=entries, carried=carried)
        task, steps = task_of(items)
        return _Run(
            self,
            queue,
            job,
            "backlog",
            slot=slot,
            entries=[merge_backlog(items, runner.job_id)],
            carried=carried,
            task_text=task,
            steps=steps,
        )

    def _launch(self, run: _Run) -> None:
        task = self._event_loop().create_task(self._execute(run), name=f"turn {run.job.id}")
        run.task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _execute(self, run: _Run) -> None:
        queue = run.queue
        outcome: TurnOutcome | None = None
        try:
            try:
                outcome = await self._turn(run)
            except asyncio.CancelledError:
                if run.cancel_reason is None:
                    raise  # not ours to record (the event loop is going away): like a crash
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
                outcome = await self._cancelled(run)
            except LeaseLostError as exc:
                log.warning("session %s: %s", queue.key, exc)
                outcome = TurnOutcome(job_id=run.job.id, status="deferred")
            except StoreError as exc:
                log.error("session %s: turn %s could not be stored: %s", queue.key, run.job.id, exc)
                outcome = await self._failed(run, f"Sorry, that failed: {exc}")
            except Exception:
                log.exception("session %s: turn %s crashed", queue.key, run.job.id)
                outcome = await self._failed(run, "Sorry, something went wrong on my side.")
            if queue.context:
                try:
                    await self._record_context(queue)
                except Exception:
                    log.exception("session %s: could not record context messages", queue.key)
        finally:
            if queue.run is run:
                queue.run = None
            self._unreserve(run.slot)
            if outcome is not None:
                self._resolve(run.job.id, outcome)
            self._settle(queue)
            self._pump()

    async def _turn(self, run: _Run) -> TurnOutcome | None:
        if run.cancel_reason is not None:
            raise asyncio.CancelledError
        session = run.queue.session
        job = run.job
        if run.mode == "start":
            transcript = await self.runtime.transcripts.get(session)
            replied = self._take_replied()
            try:
                await self.store.start_job(
                    session,
                    job.id,
                    lease_until=run.lease_until,
                    entries=run.entries,
                    carried=run.carried,
                    replied=replied,
                )
            except BaseException:
                self._give_back_replied(replied)
                raise
            transcript.append(run.entries)
        elif run.mode == "claim":
            if not await self.store.claim_job(job, run.lease_until):
                return TurnOutcome(job_id=job.id, status="deferred")
            log.info("session %s: resuming job %s after a crash", session.key, job.id)
        loop = self._event_loop()
        deadline = loop.call_at(loop.time() + self.settings.turn_deadline, self._expire, run)
        try:
            if self._shows_typing(session):
                async with self._typing(session):
                    result = await self.runtime.run_turn(session, job.id, control=run)
            else:
                result = await self.runtime.run_turn(session, job.id, control=run)
        finally:
            deadline.cancel()
        if result.status == "yielded":
            await self._yielded(run, result)
            return None
        delivery = await self._send(session, result.reply, run.job.reply_to, kind="reply")
        if delivery.status == "failed":
            await self.store.mark_delivery_failed(job.id, delivery.error or "unknown")
        self._mark_replied(job.id)
        return TurnOutcome(
            job_id=job.id,
            status="done" if result.status == "done" else "failed",
            reply=result.reply,
            delivery=delivery,
            result=result,
        )

    async def _yielded(self, run: _Run, result: TurnResult) -> None:
        queue = run.queue
        steer = queue.steering
        task = run.task_text
        if task is None:
            transcript = await self.runtime.transcripts.get(queue.session)
            task = transcript.user_text(run.job.id)
        token = resume_token(
            task, result.entries, earlier=run.steps, reason="steer" if steer else "shutdown"
        )
        item = BacklogItem(
            kind="resume",
            job_id=run.job.id,
            lane=run.job.lane,
            resume=token,
            reply_to=run.job.reply_to,
        )
        await self.store.requeue_job(queue.session, run.job.id, item)
        queue.backlog.append(item)
        queue.steered = steer
        log.info(
            "session %s: turn %s stopped at a tool boundary (%s); its task waits in the backlog",
            queue.key,
            run.job.id,
            "a newer message" if steer else "shutdown",
        )

    def _expire(self, run: _Run) -> None:
        """The turn deadline passed: cancel the turn, unless it is already being stopped.
        (A timer and a cancel reason rather than ``asyncio.timeout``: that costs a turn 7 µs
        against 3, with three loop lookups that each make a system call.)"""
        if run.cancel_reason is None and run.task is not None:
            run.cancel_reason = "deadline"
            run.task.cancel()

    async def _cancelled(self, run: _Run) -> TurnOutcome:
        if run.cancel_reason == "deadline":
            return await self._over_deadline(run)
        self.runtime.transcripts.forget(run.queue.key)
        if run.cancel_reason == "shutdown":
            await self._release_on_shutdown(run)
            return TurnOutcome(job_id=run.job.id, status="deferred")
        await self.store.close_jobs([run.job.id, *run.carried], "cancelled", "stopped by /stop")
        log.info("session %s: turn %s stopped by /stop", run.queue.key, run.job.id)
        return TurnOutcome(job_id=run.job.id, status="cancelled")

    async def _release_on_shutdown(self, run: _Run) -> None:
        """Leave the job queued, without owner or lease: the next start resumes it."""
        with contextlib.suppress(LeaseLostError):
            await self.store.requeue_job(run.queue.session, run.job.id)

    async def _over_deadline(self, run: _Run) -> TurnOutcome:
        self.runtime.transcripts.forget(run.queue.key)
        limit = human_duration(self.settings.turn_deadline)
        log.warning("session %s: turn %s passed its %s deadline", run.queue.key, run.job.id, limit)
        text = (
            f"Sorry, this took longer than {limit} (the turn deadline) and was stopped. "
            "Ask again, perhaps in smaller steps."
        )
        await self.store.close_jobs(
            [run.job.id, *run.carried], "failed", f"turn deadline of {limit} exceeded"
        )
        delivery = await self._send(run.queue.session, text, run.job.reply_to, kind="error")
        return TurnOutcome(job_id=run.job.id, status="failed", reply=text, delivery=delivery)

    async def _failed(self, run: _Run, text: str) -> TurnOutcome:
        self.runtime.transcripts.forget(run.queue.key)
        jobs = [run.job.id, *run.carried]
        try:
            await self.store.close_jobs(jobs, "failed", "internal error")
        except StoreError as exc:
            # The user hears of the failure either way; the housekeeping closes the jobs
            # once the store can be written, so they are not run again behind their back.
            log.error(
                "session %s: could not record turn %s as failed: %s", run.queue.key, run.job.id, exc
            )
            self._unclosed.append(jobs)
        delivery = await self._send(run.queue.session, text, run.job.reply_to, kind="error")
        return TurnOutcome(job_id=run.job.id, status="failed", reply=text, delivery=delivery)

    # recovery --------------------------------------------------------------------------

    async def _recover(self, *, startup: bool) -> None:
        """Take over jobs whose owner died (and, at start-up, all queued work and backlog)."""
        if startup:
            for row, key, entry in await self.store.deferred_context():
                queue = await self._queue_for_key(key)
                if queue is not None:
                    queue.context.append((row, entry))
            for queue in list(self._queues.values()):
                await self._record_context(queue)
                self._settle(queue)  # forgotten unless it has work: memory stays bounded
        jobs = await self.store.open_jobs()
        items = await self.store.backlog_items() if startup else []
        in_backlog = {item.job_id for _, item in items}
        running_here = {q.run.job.id for q in self._queues.values() if q.run is not None}
        now = self.clock.now()
        touched: dict[str, _SessionQueue] = {}
        for job in jobs:
            if job.merged_into is not None or job.id in running_here:
                continue
            if job.status == "running":
                if job.owner == self.store.owner or not _orphaned(job, now):
                    continue
                if job.attempts >= self.settings.job_max_attempts:
                    await self._give_up(job)
                    continue
            elif not startup or job.id in in_backlog:
                continue
            queue = await self._queue_for_key(job.session_key)
            if queue is not None and all(j.id != job.id for j in queue.direct):
                queue.direct.append(job)
                touched[queue.key] = queue
        for key, item in items:
            queue = await self._queue_for_key(key)
            if queue is not None:
                queue.backlog.append(item)
                touched[queue.key] = queue
        for queue in touched.values():
            log.info(
                "session %s: recovered %d job(s) and %d backlog item(s)",
                queue.key,
                len(queue.direct),
                len(queue.backlog),
            )
            self._settle(queue)

    async def _queue_for_key(self, key: str) -> _SessionQueue | None:
        queue = self._queues.get(key)
        if queue is not None:
            return queue
        session = await self.store.get_session(key)
        return self._queue(session) if session is not None else None

    async def _give_up(self, job: TurnJob) -> None:
        log.error("job %s failed: %d attempts, each interrupted", job.id, job.attempts)
        await self.store.close_jobs(
            [job.id], "failed", f"gave up after {job.attempts} interrupted attempts"
        )
        session = await self.store.get_session(job.session_key)
        if session is not None:
            await self._send(
                session,
                "Sorry, I could not finish your request: clawbot was interrupted while working "
                f"on it ({job.attempts} of {job.attempts} attempts). Please send it again.",
                job.reply_to,
                kind="error",
            )

    async def _redeliver(self) -> None:
        """Send again replies a crashed process stored but may not have sent."""
        now = self.clock.now()
        for job in await self.store.unreplied_jobs():
            if job.owner == self.store.owner or not _orphaned(job, now):
                continue
            session = await self.store.get_session(job.session_key)
            if session is None:
                continue
            if job.status == "done":
                text = await self.store.turn_reply(job.id) or EMPTY_REPLY
            else:
                text = f"Sorry, that failed: {job.error or 'unknown error'}"
            log.info("session %s: sending the reply of job %s again", session.key, job.id)
            await self._send(session, text, job.reply_to, kind="reply")
            self._mark_replied(job.id)

    # delivery --------------------------------------------------------------------------

    async def _send(
        self,
        session: Session,
        text: str,
        reply_to: str | None,
        *,
        kind: Literal["reply", "notice", "error"],
    ) -> Delivery:
        return await self.outbox.deliver(
            OutboundMessage(
                channel=session.channel,
                chat_id=session.chat_id,
                thread_id=session.thread_id,
                text=text,
                reply_to_message_id=reply_to if session.chat_type != "dm" else None,
                session_key=session.key,
                deliver=session.deliver,
                kind=kind,
            )
        )

    def _shows_typing(self, session: Session) -> bool:
        adapter = self.outbox.adapter(session.channel)
        return adapter is not None and adapter.supports_typing and session.deliver

    @contextlib.asynccontextmanager
    async def _typing(self, session: Session) -> AsyncIterator[None]:
        async def refresh() -> None:
            while True:
                await self.outbox.typing(session.channel, session.chat_id, session.thread_id)
                await asyncio.sleep(TYPING_REFRESH_SECONDS)

        task = asyncio.create_task(refresh())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _handle_for(self, job: TurnJob) -> TurnHandle:
        future: asyncio.Future[TurnOutcome] = self._event_loop().create_future()
        if self.closing:  # stored during shutdown: it runs after the restart
            future.set_result(TurnOutcome(job_id=job.id, status="deferred"))
        else:
            self._waiters.setdefault(job.id, []).append(future)
        return TurnHandle(job_id=job.id, session_key=job.session_key, lane=job.lane, future=future)

    def _resolve(self, job_id: str, outcome: TurnOutcome) -> None:
        for future in self._waiters.pop(job_id, []):
            if not future.done():
                future.set_result(outcome)

    def _mark_replied(self, job_id: str) -> None:
        """Reply marks ride along with the next transaction that happens anyway, or are
        written shortly after when none does. Meanwhile the intake journal holds a note of
        the mark, so a crash in between does not send the reply twice either."""
        self._replied.append(job_id)
        self.store.note_replied(job_id)
        if self._flush is None and not self.closing:
            self._flush = self._event_loop().call_later(REPLIED_FLUSH_SECONDS, self._start_flush)

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        """The loop this scheduler runs on, looked up once: asyncio's own lookup makes a
        system call (a fork check) each time, and the turn path needs it several times."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def _take_replied(self) -> list[str]:
        taken, self._replied = self._replied, []
        return taken

    def _give_back_replied(self, taken: list[str]) -> None:
        """Marks whose transaction failed wait for the next one: dropped, they would make
        the next start send those replies again (the store may be writable by then)."""
        self._replied[:0] = taken

    def _start_flush(self) -> None:
        self._flush = None
        if self._replied and self._flushing is None:
            self._flushing = asyncio.create_task(self._flush_replied())
            self._flushing.add_done_callback(self._flush_done)

    def _flush_done(self, task: asyncio.Task[None]) -> None:
        self._flushing = None
        if not task.cancelled() and task.exception() is not None:
            log.error("could not record sent replies (retried later): %s", task.exception())

    async def _close_unclosed(self) -> None:
        while self._unclosed:
            await self.store.close_jobs(self._unclosed[0], "failed", "internal error")
            del self._unclosed[0]

    async def _flush_replied(self) -> None:
        replied = self._take_replied()
        if replied:
            try:
                await self.store.mark_replied(replied)
            except BaseException:
                self._give_back_replied(replied)
                raise

    def _is_idle(self) -> bool:
        return self.active_total == 0 and not any(
            not queue.idle() for queue in self._queues.values()
        )

    def _wake_idle(self) -> None:
        if self._is_idle() or self.closing:
            waiters, self._idle_waiters = self._idle_waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)


def _runner_item(items: Sequence[BacklogItem]) -> BacklogItem:
    """The item whose job runs a backlog turn: the first from a person if any."""
    return next((item for item in items if item.lane == "main"), items[0])


_HOST = socket.gethostname()


def _orphaned(job: TurnJob, now: datetime) -> bool:
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
