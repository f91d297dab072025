"""The live log tail: the last lines the process logged, formatted as stderr shows them
(secrets masked by the same formatter), kept in memory and pushed to the console's log page
as they come."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import AsyncIterator

from clawbot.logs import RedactingFormatter, current_agent
from clawbot.redaction import redactor

KEPT_LINES = 500


class LogTail(logging.Handler):
    """A logging handler that keeps the last ``KEPT_LINES`` lines and hands each new one
    to the pages following the tail. Install it with :meth:`attach`."""

    def __init__(self, kept: int = KEPT_LINES) -> None:
        super().__init__()
        self.lines: collections.deque[str] = collections.deque(maxlen=kept)
        self._followers: set[asyncio.Queue[str]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.followed = asyncio.Event()
        """Set once a page follows the tail (what a test waits for before it logs)."""
        self.setFormatter(
            RedactingFormatter("%(asctime)s [%(agent)s] %(levelname)s %(name)s: %(message)s")
        )

    def attach(self, logger: logging.Logger | None = None) -> None:
        """Receive the records of ``logger`` (the root logger by default) from now on."""
        self._loop = asyncio.get_running_loop()
        (logger or logging.getLogger()).addHandler(self)

    def detach(self, logger: logging.Logger | None = None) -> None:
        (logger or logging.getLogger()).removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            record.agent = getattr(record, "agent", None) or current_agent.get()
            line = redactor.redact(self.format(record))
        except Exception:  # a broken record must not break the logging call
            self.handleError(record)
            return
        self.lines.append(line)
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        for queue in list(self._followers):
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(queue.put_nowait, line)

    async def follow(self) -> AsyncIterator[str]:
        """Every line logged from now on, as it comes, until the caller stops."""
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._followers.add(queue)
        self.followed.set()
        try:
            while True:
                yield await queue.get()
        finally:
            self._followers.discard(queue)
