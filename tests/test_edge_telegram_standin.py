"""The Telegram stand-in keeps Telegram's acknowledgement rule, spoken over raw HTTP.

Crash tests are only as strict as the stand-in: a stand-in that forgot an update once it had
handed it out would hide exactly the loss they look for.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.standins.telegram import TelegramHarness, TelegramStandIn


@pytest.fixture
async def harness() -> AsyncIterator[TelegramHarness]:
    h = TelegramHarness()
    await h.start()
    yield h
    await h.stop()


async def call(server: TelegramStandIn, method: str, **params: Any) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{server.url}/bot{server.token}/{method}", json=params) as response,
    ):
        return response.status, await response.json()


async def update_ids(server: TelegramStandIn, **params: Any) -> list[int]:
    status, body = await call(server, "getUpdates", **params)
    assert status == 200, body
    return [update["update_id"] for update in body["result"]]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Bot:
    """A webhook receiver that answers each delivery with the next scripted status."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.runner: web.AppRunner | None = None

    async def start(self, port: int) -> None:
        app = web.Application()
        app.router.add_post("/hook", self._receive)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", port).start()

    async def _receive(self, request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=self.statuses.pop(0) if self.statuses else 200)

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


async def test_an_update_comes_back_from_every_getupdates_until_an_offset_passes_it(
    harness: TelegramHarness,
) -> None:
    server = harness.server
    await harness.inject_message("one")
    await harness.inject_message("two")

    assert await update_ids(server) == [1, 2]
    assert await update_ids(server) == [1, 2]  # handing an update out does not confirm it
    assert await update_ids(server, offset=2) == [2]  # confirms 1, and only 1
    assert await update_ids(server) == [2]  # 1 is gone for good
    assert await update_ids(server, offset=3) == []
    assert (server.updates, server.confirmed_through) == ([], 2)


async def test_a_negative_offset_keeps_only_the_last_updates(harness: TelegramHarness) -> None:
    for text in ("one", "two", "three"):
        await harness.inject_message(text)

    assert await update_ids(harness.server, offset=-1) == [3]
    assert await update_ids(harness.server) == [3]


async def test_a_getupdates_ends_the_one_still_waiting_with_409(harness: TelegramHarness) -> None:
    server = harness.server
    waiting = asyncio.create_task(call(server, "getUpdates", timeout=30))
    await server.wait_for(lambda: server.polls_waiting == 1)

    assert await update_ids(server) == []
    status, body = await waiting

    assert status == 409
    assert body["description"].startswith("Conflict: terminated by other getUpdates request")
    assert server.conflicts == [body["description"]]


async def test_getupdates_is_refused_while_a_webhook_is_set(harness: TelegramHarness) -> None:
    server = harness.server
    await call(server, "setWebhook", url=f"http://127.0.0.1:{free_port()}/hook")

    status, body = await call(server, "getUpdates")

    assert status == 409 and "webhook is active" in body["description"]


async def test_a_webhook_delivery_is_retried_until_the_bot_answers_2xx(
    harness: TelegramHarness,
) -> None:
    server, port = harness.server, free_port()
    bot = Bot(statuses=[500, 503, 200])
    await bot.start(port)
    try:
        await call(server, "setWebhook", url=f"http://127.0.0.1:{port}/hook")
        await harness.inject_message("deliver me")
        await server.wait_for(lambda: not server.updates)
    finally:
        await bot.stop()

    assert [(a.update_id, a.status) for a in server.webhook_attempts] == [
        (1, 500),
        (1, 503),
        (1, 200),
    ]
    assert server.confirmed_through == 1


async def test_a_webhook_delivery_is_retried_while_the_bot_cannot_be_reached(
    harness: TelegramHarness,
) -> None:
    server, port = harness.server, free_port()
    await call(server, "setWebhook", url=f"http://127.0.0.1:{port}/hook")
    await harness.inject_message("deliver me later")
    await server.wait_for(lambda: len(server.webhook_attempts) >= 2)

    bot = Bot(statuses=[])
    await bot.start(port)
    try:
        await server.wait_for(lambda: not server.updates)
    finally:
        await bot.stop()

    statuses = [a.status for a in server.webhook_attempts]
    assert statuses[:2] == [None, None] and statuses[-1] == 200
    assert server.confirmed_through == 1
