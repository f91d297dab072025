"""The sessions with work, the lanes their next turns wait in, and the slots running turns
hold: ``main``, ``subagent``, ``cron`` and ``announce`` each have a concurrency limit, and
all lanes together a global one. A session never has more than ONE active turn."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from clawbot.clock import Clock
from clawbot.messages import TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.scheduling.backlog import ResumeStep, merge_backlog, task_of
from clawbot.scheduling.jobs import LANES, Lane, TurnJob
from clawbot.scheduling.records import ActiveTurn, QueueState, RunKind
from clawbot.scheduling.session_state import Run, RunMode, SessionQueue, runner_item
from clawbot.settings import Settings


class SessionQueues:
    """Queues each session's next turn in its lane and starts it when there is room.

    ``launch`` starts a planned turn; ``carry`` hands the outcome waiters of jobs merged
    into a turn to the job that runs it; ``closing`` says whether the scheduler is shutting
    down (nothing new starts then)."""

    def __init__(
        self,
        *,
        settings: Settings,
        clock: Clock,
        closing: Callable[[], bool],
        launch: Callable[[Run], None],
        carry: Callable[[str, Sequence[str]], None],
    ) -> None:
        self.settings = settings
        self.clock = clock
        self._lease = timedelta(seconds=settings.job_lease)  # built once: 5,000 instructions
        self._closing = closing
        self._launch = launch
        self._carry = carry
        self.limits: dict[Lane, int] = {
            "main": settings.lane_main,
            "subagent": settings.lane_subagent,
            "cron": settings.lane_cron,
            "announce": settings.lane_announce,
        }
        self.active: dict[Lane, int] = dict.fromkeys(LANES, 0)
        self.active_total = 0
        self._sessions: dict[str, SessionQueue] = {}
        self._ready: dict[Lane, deque[str]] = {lane: deque() for lane in LANES}
        self._idle_waiters: list[asyncio.Future[None]] = []

    # sessions --------------------------------------------------------------------------

    def __contains__(self, key: object) -> bool:
        return key in self._sessions

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, key: str) -> SessionQueue | None:
        return self._sessions.get(key)

    def queue(self, session: Session) -> SessionQueue:
        """The session's queue, created on first use; it takes the latest session."""
        queue = self._sessions.get(session.key)
        if queue is None:
            queue = self._sessions[session.key] = SessionQueue(session)
        else:
            queue.session = session
        return queue

    def state(self, session_key: str) -> QueueState:
        """A session's scheduling state, for ``/queue``."""
        queue = self._sessions.get(session_key)
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

    def queues(self) -> list[SessionQueue]:
        """A snapshot: settling a queue may forget it."""
        return list(self._sessions.values())

    def runs(self) -> list[Run]:
        return [queue.run for queue in self._sessions.values() if queue.run is not None]

    # lanes -----------------------------------------------------------------------------

    def has_room(self, lane: Lane) -> bool:
        return (
            self.active[lane] < self.limits[lane]
            and self.active_total < self.settings.max_active_turns
        )

    def waiting(self, lane: Lane) -> bool:
        """Sessions wait for this lane: a new turn queues behind them."""
        return bool(self._ready[lane])

    def reserve(self, lane: Lane) -> None:
        self.active[lane] += 1
        self.active_total += 1

    def unreserve(self, lane: Lane) -> None:
        self.active[lane] -= 1
        self.active_total -= 1

    def settle(self, queue: SessionQueue) -> None:
        """After any change to a session: queue its next turn, or forget it when idle.

        A session with a message still being stored waits: its last submitter settles it,
        so no turn starts on input that is not in the database yet."""
        if (
            queue.run is None
            and queue.ready_lane is None
            and not queue.submitting
            and queue.has_work()
        ):
            if not self._closing():
                lane = queue.next_lane()
                queue.ready_lane = lane
                self._ready[lane].append(queue.key)
                self.pump()
        elif queue.idle() and self._sessions.get(queue.key) is queue:
            del self._sessions[queue.key]
        if self._idle_waiters:
            self.wake_idle()

    def pump(self) -> None:
        """Start queued turns while their lanes and the global limit have room."""
        if self._closing():
            return
        for lane in LANES:
            ready = self._ready[lane]
            while ready and self.has_room(lane):
                queue = self._sessions.get(ready.popleft())
                if queue is None or queue.ready_lane != lane:
                    continue
                queue.ready_lane = None
                if queue.run is not None or not queue.has_work():
                    continue
                run = self._plan(queue, lane)
                queue.run = run
                self.reserve(lane)
                self._launch(run)

    def finish(self, run: Run) -> None:
        """A turn ended: free its session and slot, and start what waits."""
        queue = run.queue
        if queue.run is run:
            queue.run = None
        self.unreserve(run.slot)
        self.settle(queue)
        self.pump()

    # turns -----------------------------------------------------------------------------

    def lease_from_now(self) -> datetime:
        return self.clock.now() + self._lease

    def new_run(
        self,
        queue: SessionQueue,
        job: TurnJob,
        kind: RunKind,
        *,
        slot: Lane,
        entries: Sequence[TranscriptEntry] = (),
        carried: Sequence[str] = (),
        task_text: str | None = None,
        steps: tuple[ResumeStep, ...] = (),
        mode: RunMode = "start",
    ) -> Run:
        """A turn of ``job`` in ``slot``, starting now, under the job's lease or a new one."""
        return Run(
            queue,
            job,
            kind,
            slot=slot,
            started=self.clock.monotonic(),
            lease_until=job.lease_until or self.lease_from_now(),
            closing=self._closing,
            entries=entries,
            carried=carried,
            task_text=task_text,
            steps=steps,
            mode=mode,
        )

    def _plan(self, queue: SessionQueue, slot: Lane) -> Run:
        """The session's next turn: a job whose input is in the transcript already, else the
        messages that steered the last turn, else the whole backlog as one message."""
        if queue.direct:
            job = queue.direct.popleft()
            if job.status == "running":
                return self.new_run(queue, job, "recovered", slot=slot, mode="claim")
            return self.new_run(queue, job, "message", slot=slot)
        steered = queue.steered and queue.steering
        handed = queue.handed_over and not steered
        queue.steered = queue.handed_over = False
        if steered:
            items = [i for i in queue.backlog if i.kind == "message" and i.steers]
        elif handed:
            items = [i for i in queue.backlog if i.kind == "message"]
        else:
            items = list(queue.backlog)
        taken = {id(item) for item in items}
        queue.backlog = [item for item in queue.backlog if id(item) not in taken]
        runner = items[0] if steered or handed else runner_item(items)
        carried = [item.job_id for item in items if item is not runner]
        self._carry(runner.job_id, carried)
        reply_to = next((i.reply_to for i in reversed(items) if i.reply_to), runner.reply_to)
        job = TurnJob(id=runner.job_id, session_key=queue.key, lane=runner.lane, reply_to=reply_to)
        if steered or handed:
            entries = [
                item.entry.model_copy(update={"turn_id": runner.job_id})
                for item in items
                if item.entry is not None
            ]
            kind: RunKind = "steered" if steered else "message"
            return self.new_run(queue, job, kind, slot=slot, entries=entries, carried=carried)
        task, steps = task_of(items)
        return self.new_run(
            queue,
            job,
            "backlog",
            slot=slot,
            entries=[merge_backlog(items, runner.job_id)],
            carried=carried,
            task_text=task,
            steps=steps,
        )

    # idleness --------------------------------------------------------------------------

    async def wait_idle(self) -> None:
        """Return once no turn runs and nothing waits (or the scheduler shuts down)."""
        while not self.is_idle() and not self._closing():
            waiter = asyncio.get_running_loop().create_future()
            self._idle_waiters.append(waiter)
            await waiter

    def is_idle(self) -> bool:
        return self.active_total == 0 and not any(
            not queue.idle() for queue in self._sessions.values()
        )

    def wake_idle(self) -> None:
        if self.is_idle() or self._closing():
            waiters, self._idle_waiters = self._idle_waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
