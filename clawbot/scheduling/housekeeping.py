"""The scheduler's periodic round: store journalled messages, renew the leases of long
turns, log turns held too long (the watchdog), write reply marks, close failed jobs the
store refused before, take over jobs whose owner's lease expired and, once a day, forget
old message ids."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta

from clawbot.clock import Clock, human_duration
from clawbot.scheduling.session_state import Run
from clawbot.settings import Settings
from clawbot.store import Store

log = logging.getLogger("clawbot.scheduler")

SEEN_RETENTION = timedelta(days=7)
"""How long a platform message id stays in the dedup ledger (redeliveries come within hours)."""
SEEN_FORGET_EVERY = 24 * 3600.0
"""Seconds between two passes that forget ledger ids older than SEEN_RETENTION."""


class Housekeeping:
    """``runs`` lists the turns in flight; ``flush_replied`` writes pending reply marks;
    ``close_unclosed`` closes failed jobs the store refused; ``recover`` takes over jobs
    whose owner died."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        clock: Clock,
        runs: Callable[[], list[Run]],
        flush_replied: Callable[[], Awaitable[None]],
        close_unclosed: Callable[[], Awaitable[None]],
        recover: Callable[[], Awaitable[None]],
    ) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self._runs = runs
        self._flush_replied = flush_replied
        self._close_unclosed = close_unclosed
        self._recover = recover
        self._task: asyncio.Task[None] | None = None
        self._forgot_seen_at: float | None = None  # monotonic time of the last ledger pass

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def tick(self) -> None:
        """One round (the background task calls it; tests call it directly)."""
        # Journalled messages become rows other processes can see within one interval at
        # the latest, well inside their jobs' leases; a dead peer's journal is stored.
        await self.store.flush()
        await self.store.recover_intakes()
        now = self.clock.now()
        lease = timedelta(seconds=self.settings.job_lease)
        runs = self._runs()
        due = [run for run in runs if run.lease_until - now <= lease * 2 / 3]
        if due:
            until = now + lease
            await self.store.jobs.renew([run.job.id for run in due], until)
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
        await self._recover()
        if self._forgot_seen_at is None or monotonic - self._forgot_seen_at >= SEEN_FORGET_EVERY:
            self._forgot_seen_at = monotonic
            forgotten = await self.store.ledger.forget_older_than(SEEN_RETENTION)
            if forgotten:
                log.info(
                    "forgot %d platform message ids older than %d days",
                    forgotten,
                    SEEN_RETENTION.days,
                )

    async def _loop(self) -> None:
        interval = min(self.settings.job_lease / 3, self.settings.turn_watchdog / 2, 10.0)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.tick()
            except Exception:
                log.exception("scheduler housekeeping failed; retrying in %.0f s", interval)
