"""The scheduler: every turn is a persisted TurnJob that runs in a lane.

Rules, each enforced by the part named:

- Lanes ``main``, ``subagent``, ``cron`` and ``announce`` each have a concurrency limit, and
  all lanes together a global one. A session never has more than ONE active turn
  (:mod:`~clawbot.scheduling.queues`).
- Steer-backlog: a message for a session whose turn is in flight goes to the session's
  backlog; a person's message makes the running turn yield at its next safe tool boundary
  (the runtime asks :class:`TurnControl`), the interrupted task's resume token joins the
  backlog and the new message runs next. Without a boundary the message waits (backlog-only).
  A turn that does not follow a steer drains the whole backlog into ONE ``[Backlog]`` message.
  Internal announce traffic waits in the backlog and never steers (here, and
  :mod:`~clawbot.scheduling.turns`).
- Nothing lost: a message is stored with its job before :meth:`Scheduler.submit` returns,
  and one the database took is queued even if its sender was cancelled meanwhile
  (:mod:`~clawbot.scheduling.intake`).
  A running job holds a lease (written with the job, renewed only for long turns); at start
  jobs whose owner died are resumed from the transcript, or failed with a note after
  ``job_max_attempts``. A reply that may not have gone out before a crash is sent again
  (:mod:`~clawbot.scheduling.recovery`).
- Nothing stuck: a turn past ``turn_deadline`` is cancelled and the user told; the watchdog
  logs turns held longer than ``turn_watchdog`` (:mod:`~clawbot.scheduling.housekeeping`);
  ``/stop`` cancels a turn at once.

:class:`Scheduler` is the facade: it takes messages in, answers ``/queue`` and ``/stop``,
and wires the parts together.
"""

from __future__ import annotations

import asyncio
import logging

from clawbot.channels.outbox import Outbox
from clawbot.clock import Clock, SystemClock
from clawbot.errors import ShuttingDownError
from clawbot.messages import TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.runtime.turn import Runtime
from clawbot.scheduling.adoption import Adopter
from clawbot.scheduling.context import ContextMessages
from clawbot.scheduling.delivery import Replies, ReplyMarks
from clawbot.scheduling.hooks import TurnEnds
from clawbot.scheduling.housekeeping import Housekeeping
from clawbot.scheduling.intake import MessageIntake
from clawbot.scheduling.jobs import Lane
from clawbot.scheduling.outcomes import Outcomes
from clawbot.scheduling.placement import Placement
from clawbot.scheduling.queues import SessionQueues
from clawbot.scheduling.records import (
    QueueState,
    StopReport,
    TurnHandle,
    TurnOutcome,
)
from clawbot.scheduling.recovery import Recovery
from clawbot.scheduling.session_state import Run
from clawbot.scheduling.turns import STOPPED_WITH_PARENT, TurnRunner
from clawbot.settings import Settings
from clawbot.store import Store
from clawbot.subagents.records import InjectionWrite

log = logging.getLogger("clawbot.scheduler")


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
        self.closing = False
        self._started = False
        self._start_lock = asyncio.Lock()
        self._started_event = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._outcomes = Outcomes(loop=self._event_loop, closing=self._is_closing)
        self._replies = Replies(outbox, settings)
        self._marks = ReplyMarks(store, loop=self._event_loop, closing=self._is_closing)
        self._queues = SessionQueues(
            settings=settings,
            clock=self.clock,
            closing=self._is_closing,
            launch=self._launch,
            carry=self._outcomes.carry,
        )
        self._context = ContextMessages(
            store=store, transcripts=runtime.transcripts, queues=self._queues
        )
        self._turns = TurnRunner(
            settings=settings,
            store=store,
            runtime=runtime,
            replies=self._replies,
            marks=self._marks,
            loop=self._event_loop,
            resolve=self._outcomes.resolve,
            finish=self._queues.finish,
            record_context=self._context.record,
        )
        self._recovery = Recovery(
            settings=settings,
            store=store,
            clock=self.clock,
            queues=self._queues,
            replies=self._replies,
            marks=self._marks,
            record_context=self._context.record,
        )
        self._adopter = Adopter(store=store, queues=self._queues, recovery=self._recovery)
        self._placement = Placement(
            settings=settings,
            store=store,
            adopter=self._adopter,
            stop=self._stop_here,
            transcripts=runtime.transcripts,
        )
        self._intake = MessageIntake(
            store=store,
            runtime=runtime,
            queues=self._queues,
            marks=self._marks,
            outcomes=self._outcomes,
            turns=self._turns,
            context=self._context,
            placement=self._placement,
            adopter=self._adopter,
            closing=self._is_closing,
        )
        self._housekeeping = Housekeeping(
            settings=settings,
            store=store,
            clock=self.clock,
            runs=self._queues.runs,
            flush_replied=self._marks.flush,
            close_unclosed=self._turns.close_unclosed,
            recover=self._look_around,
        )

    # life cycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Recover what a previous process left (orphaned jobs, the backlog, replies that
        may not have gone out), then start housekeeping. Call it once the adapters are
        connected: recovered turns reply through them. Idempotent."""
        async with self._start_lock:
            if self._started:
                return
            if self._placement.enabled:
                await self._placement.round(startup=True)
                self._placement.start()
            else:
                await self._recovery.recover(startup=True)
                await self._recovery.redeliver()
            self._housekeeping.start()
            self._started = True
            if self._turns.ends is not None:
                await self._turns.ends.recover()
            self._started_event.set()

    async def wait_started(self) -> None:
        """Return once :meth:`start` has run: work of its own (a schedule's loop) starts
        no turn before the adapters are connected and recovery is done."""
        await self._started_event.wait()

    async def shutdown(self, timeout: float | None = None) -> None:
        """Stop intake, give running turns ``timeout`` seconds (default: the
        ``shutdown_timeout`` setting) to finish or reach a tool boundary (where they yield a
        resume token), then cancel the rest and leave them queued to resume on the next
        start. Queued work and the backlog are already stored. Idempotent."""
        if self.closing:
            return
        self.closing = True
        await self._intake.drain()
        await self._housekeeping.stop()
        wait = self.settings.shutdown_timeout if timeout is None else timeout
        tasks = self._turns.tasks()
        if tasks:
            # A turn waiting for a person's approval has nothing to finish: stop it now.
            parked = self.runtime.parked() & set(tasks)
            for run in self._queues.runs():
                if run.task is not None and run.task in parked and run.cancel_reason is None:
                    run.cancel_reason = "shutdown"
                    run.task.cancel()
            _, pending = await asyncio.wait(tasks, timeout=wait)
            for run in self._queues.runs():
                if run.task in pending and run.cancel_reason is None:
                    run.cancel_reason = "shutdown"
                    run.task.cancel()
            if pending:
                await asyncio.wait(pending)
        await self._marks.close()
        await self._placement.stop()
        self._outcomes.defer_all()
        self._queues.wake_idle()

    async def wait_idle(self) -> None:
        """Return once no turn runs and nothing waits (``clawbot chat`` at end of input)."""
        await self._queues.wait_idle()

    # intake ----------------------------------------------------------------------------

    async def submit(
        self,
        session: Session,
        entry: TranscriptEntry,
        *,
        lane: Lane = "main",
        reply_to: str | None = None,
        dedup_id: str | None = None,
        injection: InjectionWrite | None = None,
    ) -> TurnHandle | None:
        """Store a message with its TurnJob and queue it; None for a redelivered message
        (or an ``injection`` whose idempotency key was stored before).

        Returns once the message is durable: an adapter acknowledges the platform after
        this. An idle session's message enters the transcript and runs (or waits for a lane
        slot); a busy session's message waits in its backlog and, unless it is internal
        announce traffic, steers the running turn. A caller cancelled meanwhile leaves
        this to run to its end (:mod:`~clawbot.scheduling.intake`)."""
        if self.closing:
            raise ShuttingDownError("clawbot is shutting down and did not take this message")
        if not self._started:
            await self.start()
        return await self._intake.submit(session, entry, lane, reply_to, (dedup_id, injection))

    async def add_context(
        self, session: Session, entry: TranscriptEntry, *, dedup_id: str | None = None
    ) -> bool:
        """Store a message that starts no turn (group chatter kept as context), in order
        with the session's turns: at once when no turn runs, else held back (durably) until
        the running turn ends. False for a redelivered message."""
        return await self._intake.add_context(session, entry, dedup_id)

    def bind_turn_ends(self, ends: TurnEnds) -> None:
        """Call ``ends`` when a child session's turn ends (its announce), and at start-up."""
        self._turns.ends = ends

    def refresh(self, session: Session) -> None:
        """The router changed a session (agent, model, /new): later turns use the change."""
        queue = self._queues.get(session.key)
        if queue is not None:
            queue.session = session

    # control ---------------------------------------------------------------------------

    def queue_state(self, session_key: str) -> QueueState:
        return self._queues.state(session_key)

    async def stop(self, session_key: str, *, with_parent: bool = False) -> StopReport:
        """Cancel the session's active turn at once and drop the interrupted work waiting in
        its backlog; messages still waiting are answered as usual. ``with_parent``: a
        subagent whose parent was stopped, so everything it has waiting goes too, and its
        turns end as stopped with the parent (which reports nothing back to it). A
        session another process runs is asked to stop there."""
        if (
            self._placement.enabled
            and self._queues.get(session_key) is None
            and await self._placement.stop_elsewhere(session_key)
        ):
            return StopReport(stopped=None, dropped=0, waiting=0, elsewhere=True)
        return await self._stop_here(session_key, with_parent=with_parent)

    async def _stop_here(self, session_key: str, *, with_parent: bool = False) -> StopReport:
        queue = self._queues.get(session_key)
        if queue is None:
            return StopReport(stopped=None, dropped=0, waiting=0)
        dropped = [i.job_id for i in queue.backlog if i.kind == "resume" or with_parent]
        queue.backlog = [i for i in queue.backlog if i.kind != "resume" and not with_parent]
        if with_parent:
            dropped += [job.id for job in queue.direct]
            queue.direct.clear()
        if dropped:
            why = STOPPED_WITH_PARENT if with_parent else "dropped by /stop"
            await self.store.jobs.close(dropped, "cancelled", why)
            for job_id in dropped:
                self._outcomes.resolve(job_id, TurnOutcome(job_id=job_id, status="cancelled"))
        waiting = len(queue.direct) + sum(1 for item in queue.backlog if item.kind == "message")
        run = queue.run
        if run is not None:
            if run.cancel_reason is None and run.task is not None:
                run.cancel_reason = "with-parent" if with_parent else "stop"
                # A turn launched this very moment (``/stop`` right after its message) has
                # not taken its first step: cancelled now, it would never run the code that
                # records its end (its session would wait for it forever), and cancelled a
                # step later, the cancel would cut short that very record. It stops itself
                # at its first step, which sees the reason set here.
                if run.began:
                    run.task.cancel()
            if run.task is not None:
                await asyncio.wait({run.task})
        self._queues.settle(queue)
        return StopReport(
            stopped=run.job.id if run is not None else None, dropped=len(dropped), waiting=waiting
        )

    async def tick(self) -> None:
        """One round of housekeeping (a background task calls it; tests call it directly):
        store journalled messages, renew the leases of long turns, log turns held too long,
        write reply marks, close failed jobs the store refused before, take over jobs whose
        owner's lease expired and, once a day, forget old message ids."""
        await self._housekeeping.tick()

    # wiring ----------------------------------------------------------------------------

    def _is_closing(self) -> bool:
        return self.closing

    async def _look_around(self) -> None:
        """Housekeeping's take-over: of sessions whose owner died, when several processes
        share the database; else of jobs whose owner died."""
        if self._placement.enabled:
            await self._placement.round(startup=False)
        else:
            await self._recovery.recover(startup=False)

    def _launch(self, run: Run) -> None:
        self._turns.launch(run)

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        """The loop this scheduler runs on, looked up once: asyncio's own lookup makes a
        system call (a fork check) each time, and the turn path needs it several times."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop
