"""Telegram's webhook delivery to several bot processes behind a load balancer.

One webhook URL, several processes: the deployment of issue 32 puts a load balancer at the
URL the bot registered, in front of every ``clawbot run``. :class:`BalancedWebhook` is both
halves, as the Bot API server (tdlib/telegram-bot-api, ``WebhookActor``) and a reverse proxy
(nginx's defaults) behave:

- Telegram keeps one queue per chat (``queue_id``): an update of a chat is sent only once
  the one before it was answered 2xx, so a chat's updates arrive in order; different chats go
  out at once, up to ``max_connections`` requests in flight (40 unless ``setWebhook`` asked
  for another number). Every request carries ``X-Telegram-Bot-Api-Secret-Token`` when a
  secret was set. An update leaves its queue only on a 2xx answer; any other status, or a
  connection that fails, means it is sent again after a pause (the chat's later updates wait
  behind it).
- The balancer sends each request to the next process in turn (round robin from a seeded
  start). A process that refuses the connection (it is dead) is skipped for the next one
  (``proxy_next_upstream error``); when every process refuses, or one drops the connection
  after the request was sent (a POST is not replayed), Telegram is answered 502 and delivers
  the update again later, through the balancer, so to a live process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import aiohttp

if TYPE_CHECKING:
    from .telegram import TelegramStandIn

DEFAULT_MAX_CONNECTIONS = 40
"""``setWebhook``'s ``max_connections`` when not given (the Bot API allows 1-100)."""
BAD_GATEWAY = 502
"""What the balancer answers when no process took the request."""


def queue_of(update: dict[str, Any]) -> str:
    """The queue Telegram keeps an update in: its chat's, else a queue of its own."""
    for kind in ("message", "edited_message", "channel_post", "edited_channel_post"):
        if kind in update:
            return f"chat {update[kind]['chat']['id']}"
    query = update.get("callback_query") or {}
    if "message" in query:
        return f"chat {query['message']['chat']['id']}"
    return f"update {update['update_id']}"


class BalancedWebhook:
    """Delivers the stand-in's pending updates to ``backends`` (base URLs, one per process;
    the webhook URL's path is kept). ``delivered_to`` counts the 2xx answers of each."""

    def __init__(
        self,
        standin: TelegramStandIn,
        backends: Sequence[str],
        *,
        seed: int,
        retry_seconds: float,
    ) -> None:
        self.standin = standin
        self.backends = [backend.rstrip("/") for backend in backends]
        self.delivered_to = dict.fromkeys(self.backends, 0)
        self._rng = random.Random(seed)
        self._next = self._rng.randrange(len(self.backends))
        self._retry_seconds = retry_seconds
        self._draining: dict[str, asyncio.Task[None]] = {}
        self._session: aiohttp.ClientSession | None = None
        self._connections = asyncio.Semaphore(DEFAULT_MAX_CONNECTIONS)

    def set_max_connections(self, count: int) -> None:
        """What ``setWebhook``'s ``max_connections`` asked for."""
        self._connections = asyncio.Semaphore(count)

    async def run(self) -> None:
        """Start a drain for every chat with pending updates and none running, until cancelled."""
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        try:
            while True:
                await self.standin.wait_for(self._idle_queues, timeout=None)
                for queue in self._idle_queues():
                    self._draining[queue] = asyncio.create_task(self._drain(queue))
        finally:
            for task in self._draining.values():
                task.cancel()
            for task in list(self._draining.values()):
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await self._session.close()

    def _idle_queues(self) -> list[str]:
        if not self.standin.webhook_url:
            return []
        queues = {queue_of(update) for update in self.standin.updates}
        return sorted(queue for queue in queues if queue not in self._draining)

    def _head(self, queue: str) -> dict[str, Any] | None:
        return next((u for u in self.standin.updates if queue_of(u) == queue), None)

    async def _drain(self, queue: str) -> None:
        """Send the queue's updates one at a time, each until it is answered 2xx."""
        from .telegram import WebhookAttempt

        try:
            while (update := self._head(queue)) is not None and self.standin.webhook_url:
                async with self._connections:
                    status, backend = await self._through_balancer(update)
                attempt = WebhookAttempt(update["update_id"], status, backend)
                self.standin.webhook_attempts.append(attempt)
                if self.standin.on_webhook_answer is not None:
                    self.standin.on_webhook_answer(attempt)
                if 200 <= status < 300:
                    self.standin.confirm(update)
                else:
                    await self.standin.notify()
                    await asyncio.sleep(self._retry_seconds)
        finally:
            del self._draining[queue]  # no await since the last check: no update is missed
        await self.standin.notify()

    async def _through_balancer(self, update: dict[str, Any]) -> tuple[int, str | None]:
        """The next live process's answer and which process gave it, or 502 and None."""
        assert self._session is not None
        path = urlsplit(self.standin.webhook_url).path or "/"
        headers = {"Content-Type": "application/json"}
        if self.standin.webhook_secret:
            headers["X-Telegram-Bot-Api-Secret-Token"] = self.standin.webhook_secret
        first = self._next
        self._next = (self._next + 1) % len(self.backends)
        for step in range(len(self.backends)):
            backend = self.backends[(first + step) % len(self.backends)]
            try:
                async with self._session.post(
                    backend + path,
                    data=json.dumps(update),
                    headers=headers,
                    timeout=aiohttp.ClientTimeout(total=60),
                ) as response:
                    if 200 <= response.status < 300:
                        self.delivered_to[backend] += 1
                    return response.status, backend
            except aiohttp.ClientConnectorError:
                continue  # refused: the process is gone, try the next one
            except (aiohttp.ClientError, TimeoutError):
                return BAD_GATEWAY, None  # dropped after the request went out
        return BAD_GATEWAY, None
