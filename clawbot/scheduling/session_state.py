"""What the scheduler holds in memory for one session: its queued jobs, its backlog, context
messages held back while a turn runs, and the turn in flight. Plain state, shared by the
parts that queue, run and recover turns; the database holds the durable copy."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from clawbot.messages import TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.runtime.control import TurnControl
from clawbot.scheduling.backlog import BacklogItem, ResumeStep
from clawbot.scheduling.jobs import Lane, TurnJob
from clawbot.scheduling.records import RunKind

NOT_RUN_SHUTDOWN = "not run: clawbot is restarting; resumes from the backlog"

CancelReason = Literal["stop", "with-parent", "shutdown", "deadline"]
RunMode = Literal["start", "claim", "started"]


@dataclass
class SessionQueue:
    session: Session
    direct: deque[TurnJob] = field(default_factory=deque)
    backlog: list[BacklogItem] = field(default_factory=list)
    run: Run | None = None
    ready_lane: Lane | None = None
    submitting: int = 0
    steered: bool = False
    handed_over: bool = False
    """Messages another process took in reached this session while it was idle: they run as
    themselves (as they would have there), not as a [Backlog] summary."""
    context: list[tuple[int, TranscriptEntry]] = field(default_factory=list)
    recording: bool = False

    @property
    def key(self) -> str:
        return self.session.key

    def holds(self) -> set[str]:
        """The job ids this session holds in memory: its turn (and the jobs it carries), its
        queued jobs and its backlog."""
        ids = {job.id for job in self.direct} | {item.job_id for item in self.backlog}
        if self.run is not None:
            ids.add(self.run.job.id)
            ids.update(self.run.carried)
        return ids

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
        return runner_item(self.backlog).lane


class Run(TurnControl):
    """One turn in flight; also the runtime's TurnControl for it. ``closing`` says whether
    the scheduler is shutting down (a turn then yields at its next tool boundary)."""

    def __init__(
        self,
        queue: SessionQueue,
        job: TurnJob,
        kind: RunKind,
        *,
        slot: Lane,
        started: float,
        lease_until: datetime,
        closing: Callable[[], bool],
        entries: Sequence[TranscriptEntry] = (),
        carried: Sequence[str] = (),
        task_text: str | None = None,
        steps: tuple[ResumeStep, ...] = (),
        mode: RunMode = "start",
    ) -> None:
        self.queue = queue
        self.job = job
        self.kind = kind
        self.slot = slot
        self.entries = tuple(entries)
        self.carried = tuple(carried)
        self.task_text = task_text
        self.steps = steps
        self.mode = mode
        self.started = started
        self.lease_until = lease_until
        self.task: asyncio.Task[None] | None = None
        self.cancel_reason: CancelReason | None = None
        self.began = False
        """The turn's task took its first step, past the check of ``cancel_reason``: from
        then on a stop cancels the task; before, the task stops itself at that check."""
        self.warned_at: float | None = None
        self._closing = closing

    def should_yield(self) -> bool:
        return self._closing() or self.queue.steering

    def not_run_note(self) -> str:
        return super().not_run_note() if self.queue.steering else NOT_RUN_SHUTDOWN


def runner_item(items: Sequence[BacklogItem]) -> BacklogItem:
    """The item whose job runs a backlog turn: the first from a person if any."""
    return next((item for item in items if item.lane == "main"), items[0])
