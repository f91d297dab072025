"""``clawbot run``: the bot serving its platform channels until SIGINT/SIGTERM.

Each inbound message is stored by the router before the adapter's ``on_message`` returns
(so the platform is acknowledged only then), and its outcome is awaited in a tracked task, so
an adapter's receive loop never waits for a turn (the scheduler runs one turn at a time per
session). Once the adapters are up, the scheduler resumes work a previous process left, and adapters
whose platform never redelivers (Discord) read what was posted while no process was up, in
the background (``Adapter.catch_up``); the dedup ledger drops whatever was stored already.
Shutdown is graceful and bounded: intake stops first, running turns get what is left of
``shutdown_timeout`` seconds to finish or stop at a tool boundary, what is left is cancelled
and logged (kept as a resumable job: the next start resumes it), then connections close (at
most ``CLOSE_TIMEOUT`` more seconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from clawbot.app import Clawbot
from clawbot.channels.interface import Adapter
from clawbot.cli.leadership import Leadership
from clawbot.errors import ShuttingDownError
from clawbot.messages import InboundMessage
from clawbot.routing.access import AccessGateway
from clawbot.routing.sessions import session_key_for
from clawbot.store import LeaderLocks, leader_locks

log = logging.getLogger("clawbot.service")

CLOSE_TIMEOUT = 5.0
"""Seconds allowed for closing the platform connections once the turns are done."""


@dataclass(frozen=True)
class ShutdownReport:
    """What a shutdown did: turns that finished in time and those that were cancelled."""

    finished: int
    cancelled: tuple[str, ...]
    seconds: float


class Service:
    """Connects adapters to a bot's router and runs their messages as tracked tasks."""

    def __init__(
        self,
        bot: Clawbot,
        adapters: Sequence[Adapter],
        *,
        shutdown_timeout: float,
        leader_locks: LeaderLocks | None = None,
    ) -> None:
        self.bot = bot
        self.adapters = list(adapters)
        self.shutdown_timeout = shutdown_timeout
        self._leader_locks = leader_locks
        self.leaderships: list[Leadership] = []
        """One per adapter whose intake only one process may hold (on PostgreSQL)."""
        self._tasks: dict[asyncio.Task[object], InboundMessage] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._receiving = 0
        self._accepting = False
        self._started: list[Adapter] = []
        self._catching_up: list[asyncio.Task[int]] = []

    @property
    def running_turns(self) -> int:
        return len(self._tasks)

    async def start(self) -> None:
        """Connect and start every adapter; if one fails, the started ones are stopped. An
        adapter whose intake only one process may hold (``Adapter.exclusive_intake``, on a
        shared database) starts sending here and receives while it leads (``Leadership``)."""
        self._accepting = True
        receiving: list[Adapter] = []
        for adapter in self.adapters:
            self.bot.connect(adapter)
            exclusive = adapter.exclusive_intake if self._leader_locks is not None else None
            try:
                if exclusive is None:
                    await adapter.start(self.receive)
                else:
                    await adapter.start_sending()
            except BaseException:
                self._accepting = False
                await self._close_connections()
                raise
            self._started.append(adapter)
            if exclusive is None:
                receiving.append(adapter)
                log.info("%s: receiving messages", adapter.name)
            else:
                assert self._leader_locks is not None
                self.leaderships.append(
                    Leadership(
                        adapter,
                        self._leader_locks(exclusive),
                        self.receive,
                        retry_seconds=self.bot.settings.leader_retry_seconds,
                        on_lead=self._caught_up_later,
                    )
                )
        await self.bot.start()
        for adapter in receiving:
            self._caught_up_later(adapter)
        for leadership in self.leaderships:
            await leadership.begin()

    def _caught_up_later(self, adapter: Adapter) -> None:
        """Read what ``adapter`` missed in the background, once it receives."""
        if adapter.catch_up_window > timedelta(0):
            self._catching_up.append(
                asyncio.create_task(self._catch_up(adapter), name=f"{adapter.name} catch-up")
            )

    async def _catch_up(self, adapter: Adapter) -> int:
        """Hand the adapter its active chats so it fetches what it missed; a failure is
        logged, not fatal: live messages keep flowing, and the next start tries again."""
        since = self.bot.scheduler.clock.now() - adapter.catch_up_window
        try:
            chats = await self.bot.store.ledger.recent_chats(adapter.name, since)
            caught = await adapter.catch_up(chats) if chats else 0
        except Exception:
            log.exception("%s: could not fetch the messages missed while offline", adapter.name)
            return 0
        log.info(
            "%s: read %d active chat(s) for missed messages; %d handed over",
            adapter.name,
            len(chats),
            caught,
        )
        return caught

    async def caught_up(self) -> int:
        """Wait for the start's catch-ups; how many missed messages they handed over."""
        counts = await asyncio.gather(*self._catching_up)
        return sum(counts)

    async def receive(self, message: InboundMessage) -> None:
        """The adapters' ``on_message``: returns once the message is stored, and it runs
        in a task. It raises instead when the message was not taken (during shutdown), so
        the adapter does not tell the platform it arrived."""
        if not self._accepting:
            log.warning(
                "did not take a %s message that arrived during shutdown (message %s); it is"
                " left unacknowledged for the platform to deliver again",
                message.channel,
                message.message_id,
            )
            raise ShuttingDownError("clawbot is shutting down and did not take this message")
        self._receiving += 1
        self._idle.clear()
        try:
            receipt = await self.bot.router.receive(message)
        finally:
            self._receiving -= 1
        task: asyncio.Task[object] = asyncio.create_task(
            receipt.wait(), name=f"handle {session_key_for(message)}"
        )
        self._tasks[task] = message
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[object]) -> None:
        self._tasks.pop(task, None)
        if not self._tasks and not self._receiving:
            self._idle.set()

    async def idle(self) -> None:
        """Return once no message is being handled."""
        await self._idle.wait()

    async def stop(self) -> ShutdownReport:
        """Stop intake, let running turns finish within the timeout, cancel the rest, close."""
        started = time.monotonic()
        await asyncio.gather(*(leadership.stop_following() for leadership in self.leaderships))
        for catching_up in self._catching_up:  # the next start reads from where it got
            catching_up.cancel()
        await asyncio.gather(*self._catching_up, return_exceptions=True)
        try:
            async with asyncio.timeout(self.shutdown_timeout):
                await asyncio.gather(
                    *(self._quietly(adapter, "stop_intake") for adapter in self._started)
                )
        except TimeoutError:
            log.warning("stopping intake took over %.0fs; going on", self.shutdown_timeout)
        # Intake stopped: the next leader may take over now, while turns finish here.
        await asyncio.gather(*(leadership.release() for leadership in self.leaderships))
        self._accepting = False
        tasks = dict(self._tasks)
        if tasks:
            log.info(
                "shutting down: waiting up to %.0fs for %d running turn(s)",
                self.shutdown_timeout,
                len(tasks),
            )
        remaining = self.shutdown_timeout - (time.monotonic() - started)
        await self.bot.scheduler.shutdown(max(0.0, remaining))
        if tasks:
            await asyncio.wait(tasks)
        cancelled = []
        for task, message in tasks.items():
            if task.cancelled() or task.exception() is not None:
                continue
            if getattr(task.result(), "kind", None) != "deferred":
                continue
            key = session_key_for(message)
            cancelled.append(key)
            log.warning(
                "shutdown: cancelled the unfinished turn of session %s (message %s); "
                "its message stays stored and the turn resumes on the next start",
                key,
                message.message_id,
            )
        waiting = len(tasks)
        await self._close_connections()
        report = ShutdownReport(
            finished=waiting - len(cancelled),
            cancelled=tuple(sorted(cancelled)),
            seconds=time.monotonic() - started,
        )
        log.info("stopped in %.1fs (%d turn(s) cancelled)", report.seconds, len(report.cancelled))
        return report

    async def _close_connections(self) -> None:
        adapters, self._started = self._started, []
        if not adapters:
            return
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT):
                await asyncio.gather(*(self._quietly(adapter, "stop") for adapter in adapters))
        except TimeoutError:
            log.warning("closing the channel connections took over %.0fs; left", CLOSE_TIMEOUT)
        for adapter in adapters:
            self.bot.outbox.disconnect(adapter.name)

    @staticmethod
    async def _quietly(adapter: Adapter, method: str) -> None:
        try:
            await getattr(adapter, method)()
        except Exception:
            log.exception("%s: %s failed", adapter.name, method)


async def serve(
    bot: Clawbot,
    adapters: Sequence[Adapter],
    *,
    stop: asyncio.Event | None = None,
    handle_signals: bool = True,
) -> ShutdownReport:
    """Run ``adapters`` for ``bot`` behind the access gateway until ``stop`` is set or
    SIGINT/SIGTERM arrives; then shut down gracefully."""
    stop = stop or asyncio.Event()
    bot.router.access = AccessGateway(bot.store, bot.settings)
    service = Service(
        bot,
        adapters,
        shutdown_timeout=bot.settings.shutdown_timeout,
        leader_locks=leader_locks(bot.settings, "clawbot run"),
    )
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM) if handle_signals else ()

    def on_signal(signum: int) -> None:
        if not stop.is_set():
            log.info(
                "received %s: stopping (up to %.0fs for running turns)",
                signal.Signals(signum).name,
                bot.settings.shutdown_timeout,
            )
        stop.set()

    for signum in signals:
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        await service.start()
        await stop.wait()
        return await service.stop()
    finally:
        for signum in signals:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(signum)
