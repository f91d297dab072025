"""Taking a message in runs to its end even when whoever handed it in is cancelled
meanwhile (a subagent stopped while it announced, an adapter's task shut down): the
database may have taken the message already, and one it took must be queued in this process
too, or it would wait there unseen until a restart while the session's next messages wait
behind it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger("clawbot.scheduler")

T = TypeVar("T")


class WholeWrites:
    """Runs each intake as a task of its own that a cancelled caller leaves running."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[Any]] = set()

    async def run(self, intake: Coroutine[Any, Any, T]) -> T:
        task = asyncio.ensure_future(intake)
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                task.add_done_callback(_log_failure)
            raise

    async def drain(self) -> None:
        """Wait for the intakes still running (at shutdown, before the store closes)."""
        while self._running:
            await asyncio.wait(set(self._running))


def _log_failure(task: asyncio.Task[Any]) -> None:
    """Its caller left, so no one else hears of it: a message not stored is redelivered by
    its platform (it was never acknowledged)."""
    if not task.cancelled() and (error := task.exception()) is not None:
        log.error("storing a message failed after its sender stopped waiting: %s", error)
