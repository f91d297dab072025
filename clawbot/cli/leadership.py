"""One process receives an exclusive intake; the others wait to take it over.

Several ``clawbot run`` processes may serve one PostgreSQL database, but some platform
connections are allowed once per bot at a time (``Adapter.exclusive_intake``: Telegram's long
polling). For each such adapter a process holds a leader lock (``clawbot.store.LeaderLock``),
and only while it holds it does the adapter receive; every process sends. A process that does
not hold it tries again every ``leader_retry_seconds``, so when the leader dies (the database
frees its lock as its connection ends, even on SIGKILL) another takes over within about that
long. The leader checks its lock as often: when the lock's connection is lost, the server
may already have handed the lock to another process, so the adapter stops receiving at once
(never two pollers) and the process goes back to trying.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from clawbot.channels.interface import Adapter, InboundHandler
from clawbot.store import LeaderLock

log = logging.getLogger("clawbot.service")


class Leadership:
    """The leader lock of one adapter's exclusive intake, and the task that follows it."""

    def __init__(
        self,
        adapter: Adapter,
        lock: LeaderLock,
        receive: InboundHandler,
        *,
        retry_seconds: float,
        on_lead: Callable[[Adapter], None] = lambda adapter: None,
    ) -> None:
        self.adapter = adapter
        self.lock = lock
        self._receive = receive
        self._retry = retry_seconds
        self._on_lead = on_lead
        self._task: asyncio.Task[None] | None = None
        self._waiting_logged = False
        self._led_before = False
        self.leading = asyncio.Event()
        """Set while this process receives the intake."""
        self.waiting = asyncio.Event()
        """Set while it does not: it never started receiving, or it stopped."""
        self.waiting.set()

    async def begin(self) -> None:
        """Try once now (so a lone process receives as soon as it started), then follow the
        lock in the background until ``release``."""
        await self._try_to_lead()
        self._task = asyncio.create_task(self._follow(), name=f"{self.lock.name} leadership")

    async def stop_following(self) -> None:
        """Take over no more (the process is shutting down); the lock stays held until
        ``release``."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def release(self) -> None:
        """Free the lock for the next leader. The adapter's intake must be stopped first, so
        the next leader never receives beside this one."""
        await self.stop_following()
        self.leading.clear()
        self.waiting.set()
        await self.lock.release()

    async def _follow(self) -> None:
        while True:
            await asyncio.sleep(self._retry)
            if not self.lock.held:
                await self._try_to_lead()
            elif not await self.lock.still_held(timeout=self._retry):
                await self._lost()

    async def _try_to_lead(self) -> None:
        if not await self.lock.try_take():
            if not self._waiting_logged:
                holder = await self.lock.holder()
                log.info(
                    "%s: %s leads %s; this process sends only and takes over if it stops"
                    " (trying every %.1fs)",
                    self.adapter.name,
                    f"`{holder}`" if holder else "another process",
                    self.lock.name,
                    self._retry,
                )
                self._waiting_logged = True
            return
        try:
            await self.adapter.start(self._receive)
        except Exception:
            log.exception("%s: could not start %s; trying again", self.adapter.name, self.lock.name)
            await self.lock.release()
            return
        log.info(
            "%s: this process %s %s; receiving messages",
            self.adapter.name,
            "took over" if self._waiting_logged or self._led_before else "leads",
            self.lock.name,
        )
        self._waiting_logged = False
        self._led_before = True
        self.waiting.clear()
        self.leading.set()
        self._on_lead(self.adapter)

    async def _lost(self) -> None:
        self.leading.clear()
        log.warning(
            "%s: lost the lock of %s (its database connection ended): stopping receiving,"
            " as another process may take it over; trying again every %.1fs",
            self.adapter.name,
            self.lock.name,
            self._retry,
        )
        try:
            await self.adapter.stop_intake()
        except Exception:
            log.exception("%s: stopping intake failed", self.adapter.name)
        self.waiting.set()
