"""Time as the scheduler sees it, injectable so leases and the watchdog are tested without
waiting: wall-clock time for what is persisted (a lease outlives the process), monotonic
time for durations inside one process."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current UTC time (compared across processes: job leases)."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, for durations within this process."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that only moves when told to: ``clock.advance(61)`` expires a 60 s lease."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2030, 1, 1, tzinfo=UTC)
        self._monotonic = 1000.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        self._monotonic += seconds


def human_duration(seconds: float) -> str:
    """``600`` -> ``"10 minutes"``, ``12.4`` -> ``"12 s"``, ``0.05`` -> ``"0.05 s"``."""
    if seconds >= 120:
        minutes = seconds / 60
        return f"{minutes:.0f} minutes" if minutes == int(minutes) else f"{minutes:.1f} minutes"
    if seconds >= 1:
        return f"{seconds:.0f} s"
    return f"{seconds:g} s"
