"""When a task runs: a time as people write it ("in 20 minutes", "every 2 hours",
"cron 0 8 * * 1-5", "2030-01-31T09:00") read into a :class:`Trigger`, and its next due time.

Cron expressions are read and stepped by croniter (a well-kept library; never a parser of
our own), in the task's time zone, so "8 o'clock" stays 8 o'clock across daylight saving."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from clawbot.clock import human_duration
from clawbot.errors import ScheduleError
from clawbot.schedules.records import TriggerKind

EXAMPLES = (
    "e.g. 'in 20 minutes', 'every 30 minutes', 'cron 0 8 * * 1-5' (8:00 on weekdays) "
    "or '2030-01-31T09:00'"
)
_UNITS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "h": 3600,
    "hour": 3600,
    "d": 86400,
    "day": 86400,
    "w": 604800,
    "week": 604800,
}
_AMOUNT = re.compile(r"^(in|every)\s+(\d+(?:\.\d+)?\s*)?([a-z]+?)s?$")


@dataclass(frozen=True)
class Trigger:
    """A task's schedule: ``cron`` (``spec`` an expression read in ``tz``), ``interval``
    (``spec`` seconds) or ``once`` (``spec`` the time, ISO in UTC)."""

    kind: TriggerKind
    spec: str
    tz: str = "UTC"

    def first_run(self, now: datetime) -> datetime:
        """The first due time after ``now`` (a one-off: its time)."""
        if self.kind == "once":
            return datetime.fromisoformat(self.spec)
        if self.kind == "interval":
            return now + timedelta(seconds=float(self.spec))
        return self._cron_after(now)

    def next_after(self, due: datetime, now: datetime) -> datetime | None:
        """The due time after the one at ``due`` ran at ``now``: the first one still ahead,
        so a task missed while clawbot was down runs once, not once per missed time. None
        for a one-off."""
        if self.kind == "once":
            return None
        if self.kind == "interval":
            every = float(self.spec)
            steps = max(1, math.floor((now - due).total_seconds() / every) + 1)
            return due + timedelta(seconds=every * steps)
        return self._cron_after(max(due, now))

    def _cron_after(self, moment: datetime) -> datetime:
        local = moment.astimezone(ZoneInfo(self.tz))
        following: datetime = croniter(self.spec, local).get_next(datetime)
        return following.astimezone(UTC)

    def describe(self) -> str:
        if self.kind == "once":
            return f"once at {datetime.fromisoformat(self.spec):%Y-%m-%d %H:%M} UTC"
        if self.kind == "interval":
            return f"every {_every(float(self.spec))}"
        return f"cron {self.spec} ({self.tz})"


def parse_when(text: str, *, now: datetime, tz: str = "UTC", min_interval: float = 60) -> Trigger:
    """``text`` as a trigger, or a ScheduleError that says what was wrong, with examples.

    ``in <n> <unit>`` and an ISO time are one-offs (a time without an offset is read in
    ``tz``); ``every <n> <unit>`` repeats, at least ``min_interval`` seconds apart; ``cron
    <expression>`` (or a bare five-field expression) repeats in ``tz``."""
    zone = _zone(tz)
    words = " ".join(text.strip().lower().split())
    if not words:
        raise ScheduleError("no time was given for the task", hint=EXAMPLES)
    matched = _AMOUNT.match(words)
    if matched:
        return _amount(matched, text, now=now, min_interval=min_interval)
    expression = words.removeprefix("cron ").strip()
    if len(expression.split()) in (5, 6) and not _looks_like_time(expression):
        if not croniter.is_valid(expression):
            raise ScheduleError(
                f"{expression!r} is not a valid cron expression",
                hint="five fields: minute hour day-of-month month day-of-week, e.g. "
                "'cron 0 8 * * 1-5' for 8:00 on weekdays or 'cron */15 * * * *' for every "
                "quarter hour",
            )
        return Trigger("cron", expression, zone.key)
    return _once(text.strip(), zone, now)


def _amount(matched: re.Match[str], text: str, *, now: datetime, min_interval: float) -> Trigger:
    which, amount, unit = matched.group(1), matched.group(2), matched.group(3)
    if unit not in _UNITS:
        raise ScheduleError(f"{text.strip()!r}: unknown unit {unit!r}", hint=EXAMPLES)
    seconds = float(amount or 1) * _UNITS[unit]
    if seconds <= 0:
        raise ScheduleError(f"{text.strip()!r} is no time from now", hint=EXAMPLES)
    if which == "in":
        return Trigger("once", (now + timedelta(seconds=seconds)).isoformat())
    if seconds < min_interval:
        raise ScheduleError(
            f"{text.strip()!r} repeats too often (the shortest interval is "
            f"{human_duration(min_interval)})",
            hint=f"e.g. 'every {max(2, math.ceil(min_interval / 60))} minutes'",
        )
    return Trigger("interval", f"{seconds:g}")


def _once(text: str, zone: ZoneInfo, now: datetime) -> Trigger:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ScheduleError(f"{text!r} is not a time clawbot can read", hint=EXAMPLES) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    moment = moment.astimezone(UTC)
    if moment <= now:
        raise ScheduleError(
            f"{text} is in the past (it is now {now:%Y-%m-%d %H:%M} UTC)",
            hint=f"give a time to come, e.g. '{(now + timedelta(days=1)):%Y-%m-%dT%H:%M}' "
            "or 'in 20 minutes'",
        )
    return Trigger("once", moment.isoformat())


def _every(seconds: float) -> str:
    """``7200`` -> ``"2 hours"``, ``3600`` -> ``"hour"``, ``90`` -> ``"90 s"``."""
    for unit, size in (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return unit if count == 1 else f"{count} {unit}s"
    return human_duration(seconds)


def _zone(tz: str) -> ZoneInfo:
    try:
        return ZoneInfo(tz.strip() or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(
            f"{tz!r} is not a time zone", hint="an IANA name, e.g. 'Europe/Berlin' or 'UTC'"
        ) from None


def _looks_like_time(expression: str) -> bool:
    return bool(re.match(r"^\d{4}-\d{2}-\d{2}", expression))
