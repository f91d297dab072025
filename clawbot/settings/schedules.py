"""Settings of scheduled tasks and the heartbeat (docs/schedules.md)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ScheduleSettings(BaseModel):
    """Fields of :class:`~clawbot.settings.Settings` (a mixin: read through it)."""

    schedules_per_session: int = Field(
        default=20,
        ge=1,
        le=10_000,
        description="scheduled tasks one session may hold at once; one more is refused",
    )
    schedule_failures_to_pause: int = Field(
        default=3,
        ge=1,
        le=100,
        description="consecutive failed runs after which a scheduled task is paused and its "
        "chat told",
    )
    schedule_min_interval: float = Field(
        default=60.0,
        ge=1,
        description="the shortest interval, in seconds, a repeating task may have",
    )
    heartbeat_interval: float = Field(
        default=0.0,
        ge=0,
        description="seconds between heartbeat runs of HEARTBEAT.md's checklist for agents "
        "that set no heartbeat_interval of their own; 0 turns the heartbeat off",
    )
