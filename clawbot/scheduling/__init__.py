"""The scheduler (:class:`Scheduler`) and the records it hands out."""

from clawbot.scheduling.housekeeping import SEEN_FORGET_EVERY, SEEN_RETENTION
from clawbot.scheduling.records import (
    ActiveTurn,
    OutcomeStatus,
    QueueState,
    RunKind,
    StopReport,
    TurnHandle,
    TurnOutcome,
)
from clawbot.scheduling.scheduler import Scheduler

__all__ = [
    "SEEN_FORGET_EVERY",
    "SEEN_RETENTION",
    "ActiveTurn",
    "OutcomeStatus",
    "QueueState",
    "RunKind",
    "Scheduler",
    "StopReport",
    "TurnHandle",
    "TurnOutcome",
]
