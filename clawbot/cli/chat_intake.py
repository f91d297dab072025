"""The handler ``clawbot chat`` gives the console: the router's two stages apart."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from clawbot.channels.interface import StagedHandler
from clawbot.messages import InboundMessage
from clawbot.routing.router import Router


class ChatIntake(StagedHandler):
    """Takes a typed line in at once (a command answered, a message stored and queued) and
    leaves its turn to run, so the console reads on while it does."""

    def __init__(self, router: Router) -> None:
        self._router = router

    async def __call__(self, message: InboundMessage) -> None:
        await self._router.handle(message)

    async def take(self, message: InboundMessage) -> Awaitable[object]:
        receipt = await self._router.receive(message)
        return asyncio.ensure_future(receipt.wait())
