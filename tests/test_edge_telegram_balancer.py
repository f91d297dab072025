"""The Telegram stand-in behind a load balancer sends updates as Telegram does to a webhook
served by several processes (tests/standins/telegram_webhooks.py): a chat's updates one at a
time and in order, different chats at once, every request with the secret token, an update
kept until a process answers 2xx, and a dead process's share going to the live ones.

The multi-process test (tests/test_multiprocess.py) is only as strict as this: a balancer
that sent a chat's next update before the last was answered would make two processes race
on one conversation by itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from tests.standins.telegram import TelegramHarness
from tests.test_edge_telegram_standin import call, free_port

SECRET = "balanced-secret"


@dataclass
class Process:
    """A webhook receiver that answers once the test lets it (``release``), or at once."""

    held: bool = False
    received: list[tuple[int, int]] = field(default_factory=list)
    """(chat id, update id) of every delivery, in arrival order."""
    secrets: list[str] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0
    release: asyncio.Event = field(default_factory=asyncio.Event)
    runner: web.AppRunner | None = None
    arrived: Callable[[], Awaitable[None]] | None = None
    """Told of each delivery as it arrives (the stand-in's ``notify``, so a test can wait)."""

    async def start(self, port: int) -> None:
        app = web.Application()
        app.router.add_post("/hook", self._receive)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", port).start()

    async def _receive(self, request: web.Request) -> web.Response:
        update = await request.json()
        self.secrets.append(request.headers.get("X-Telegram-Bot-Api-Secret-Token", ""))
        self.received.append((update["message"]["chat"]["id"], update["update_id"]))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        if self.arrived is not None:
            await self.arrived()
        try:
            if self.held:
                await self.release.wait()
            return web.Response(status=self.statuses.pop(0) if self.statuses else 200)
        finally:
            self.in_flight -= 1

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


@pytest.fixture
async def harness() -> AsyncIterator[TelegramHarness]:
    h = TelegramHarness()
    await h.start()
    yield h
    await h.stop()


async def balanced(harness: TelegramHarness, processes: list[Process]) -> list[int]:
    """Start the processes, put the balancer in front of them and set the webhook."""
    ports = [free_port() for _ in processes]
    for process, port in zip(processes, ports, strict=True):
        process.arrived = harness.server.notify
        await process.start(port)
    harness.server.balance_webhook([f"http://127.0.0.1:{port}" for port in ports], seed=7)
    status, body = await call(
        harness.server, "setWebhook", url="https://bot.example.test/hook", secret_token=SECRET
    )
    assert status == 200, body
    return ports


async def test_a_chats_updates_go_one_at_a_time_in_order_and_chats_at_once(
    harness: TelegramHarness,
) -> None:
    processes = [Process(held=True), Process(held=True)]
    await balanced(harness, processes)
    for chat in (1001, 1002, 1003):
        for number in range(3):
            await harness.inject_message(f"message {number}", sender_id=str(chat))
    server = harness.server
    await server.wait_for(lambda: sum(len(p.received) for p in processes) == 3)
    first_wave = sorted(chat for p in processes for chat, _ in p.received)
    for process in processes:
        process.release.set()
    await server.wait_for(lambda: not server.updates)
    for process in processes:
        await process.stop()

    assert first_wave == [1001, 1002, 1003]  # one update of each chat, not two of one
    delivered = sorted(
        (update_id, chat) for process in processes for chat, update_id in process.received
    )
    for chat in (1001, 1002, 1003):
        ids = [update_id for update_id, to in delivered if to == chat]
        assert len(ids) == 3 and ids == sorted(ids)
    assert {secret for p in processes for secret in p.secrets} == {SECRET}
    assert all(p.received for p in processes)  # the balancer used both


async def test_a_dead_process_share_goes_to_the_live_one(harness: TelegramHarness) -> None:
    live = Process()
    await live.start(port := free_port())
    dead_port = free_port()  # nothing listens: the connection is refused
    server = harness.server
    server.balance_webhook([f"http://127.0.0.1:{dead_port}", f"http://127.0.0.1:{port}"], seed=1)
    await call(server, "setWebhook", url="https://bot.example.test/hook", secret_token=SECRET)
    for chat in range(1001, 1007):
        await harness.inject_message("hello", sender_id=str(chat))
    await server.wait_for(lambda: not server.updates)
    await live.stop()

    assert sorted(chat for chat, _ in live.received) == list(range(1001, 1007))
    assert [a.status for a in server.webhook_attempts] == [200] * 6  # Telegram saw no failure
    assert {a.endpoint for a in server.webhook_attempts} == {f"http://127.0.0.1:{port}"}


async def test_an_update_a_process_fails_is_sent_again_before_the_chats_next(
    harness: TelegramHarness,
) -> None:
    process = Process(statuses=[500, 502])
    await balanced(harness, [process])
    await harness.inject_message("first", sender_id="1001")
    await harness.inject_message("second", sender_id="1001")
    await harness.server.wait_for(lambda: not harness.server.updates)
    await process.stop()

    assert [update_id for _, update_id in process.received] == [1, 1, 1, 2]
    assert [a.status for a in harness.server.webhook_attempts] == [500, 502, 200, 200]


async def test_at_most_max_connections_deliveries_are_in_flight(harness: TelegramHarness) -> None:
    process = Process(held=True)
    await balanced(harness, [process])
    await call(
        harness.server,
        "setWebhook",
        url="https://bot.example.test/hook",
        secret_token=SECRET,
        max_connections=2,
    )
    for chat in range(1001, 1006):
        await harness.inject_message("hello", sender_id=str(chat))
    await harness.server.wait_for(lambda: process.in_flight == 2)
    process.release.set()
    await harness.server.wait_for(lambda: not harness.server.updates)
    await process.stop()

    assert process.most_in_flight == 2
    assert len(process.received) == 5
