"""The handler ``clawbot chat`` gives the console: the router's two stages apart."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from clawbot.channels.interface import StagedHandler
from clawbot.messages import InboundMessage
from clawbot.routing.router import Handled, Receipt, Router


class ChatIntake(StagedHandler):
    """Takes a typed line in at once (a command answered, a message stored and queued) and
    leaves its turn to run, so the console reads on while it does."""

    def __init__(self, router: Router) -> None:
        self._router = router

    async def __call__(self, message: InboundMessage) -> None:
        await self._answered(message, await self._router.receive(message))

    async def take(self, message: InboundMessage) -> Awaitable[object]:
        receipt = await self._router.receive(message)
        return asyncio.ensure_future(self._answered(message, receipt))

    async def _answered(self, message: InboundMessage, receipt: Receipt) -> Handled:
        """The message's outcome; when another process runs this conversation (several
        processes on one PostgreSQL database), its answer is shown in that process's
        terminal, and this one says so instead of staying silent."""
        handled = await receipt.wait()
        if handled.elsewhere is not None:
            await self._router.tell(
                message,
                f"Another clawbot process ({handled.elsewhere}) runs this conversation on"
                " this database: it took your message, and its answer appears there.",
            )
        return handled
