"""An aiohttp application served on 127.0.0.1 at a free port, for the tests' small servers
(the web tools' pages and search providers)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web


@asynccontextmanager
async def served(app: web.Application) -> AsyncIterator[int]:
    """Serve ``app`` until the block ends; yields its port."""
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()
