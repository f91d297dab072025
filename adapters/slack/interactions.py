"""Slack requests a person waits on: clawbot's slash command and a press of one of its buttons.

Slack never retries either and shows the person an error unless it is acked within 3 s, so
both are acked at once and then run as the person's command in a tracked task; the answer goes
through the outbox into the conversation. What cannot run — clawbot is stopping, or the
request could not be taken in — is told to that person alone, through the request's
``response_url`` (an ephemeral message), rather than only in a log they never see. An answer
for its asker alone (a refusal, ``OutboundMessage.private_to``), typed or pressed, is posted
with ``chat.postEphemeral``: only that person sees it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import aiohttp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.buttons import press_to_inbound
from adapters.slack.commands import command_to_inbound
from clawbot.channels.interface import NOT_TAKEN_IN, InboundHandler
from clawbot.messages import InboundMessage

log = logging.getLogger("adapters.slack")

RESTARTING = "clawbot is restarting. Please try again in a moment."
NOTICE_TIMEOUT = 10.0
"""Seconds telling a person their request did not run may take before it is given up."""


class Interactions:
    """bolt listeners for the slash command and button presses.

    ``taking`` is the adapter's message handler while it takes messages, None while it stops;
    ``named`` adds the sender's Slack name; ``inflight`` is the adapter's set of running tasks,
    which its ``stop`` waits for.
    """

    def __init__(
        self,
        *,
        taking: Callable[[], InboundHandler | None],
        named: Callable[[InboundMessage], Awaitable[InboundMessage]],
        inflight: set[asyncio.Task[Any]],
    ) -> None:
        self._taking = taking
        self._named = named
        self._inflight = inflight

    async def on_command(
        self, ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond | None = None
    ) -> None:
        """The slash command: Slack shows the ack's text to the person, so a command arriving
        while clawbot stops is answered in the ack itself."""
        handler = self._taking()
        inbound = command_to_inbound(command)
        if handler is None:
            await ack(text=RESTARTING)
            return
        await ack()
        if inbound is not None:
            self._spawn(self._run(handler, inbound, respond))

    async def on_press(
        self, ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond | None = None
    ) -> None:
        """A button press: Slack shows nothing of the ack, so a press arriving while clawbot
        stops is told through ``response_url`` (after the ack, which must not wait)."""
        handler = self._taking()
        await ack()
        if handler is None:
            self._spawn(tell(respond, RESTARTING))
            return
        inbound = press_to_inbound(body)
        if inbound is not None:
            self._spawn(self._run(handler, inbound, respond))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _run(
        self, handler: InboundHandler, inbound: InboundMessage, respond: AsyncRespond | None
    ) -> None:
        try:
            await handler(await self._named(inbound))
        except Exception:
            log.exception(
                "slack: the command %r from %s in %s failed",
                inbound.text.split(" ", 1)[0],
                inbound.sender_id,
                inbound.chat_id,
            )
            await tell(respond, NOT_TAKEN_IN)


async def post_privately(client: AsyncWebClient, user: str, posts: list[dict[str, Any]]) -> bool:
    """``chat.postEphemeral`` each of ``posts`` (``chat.postMessage`` arguments) to ``user``
    alone; False when Slack refuses (the person is not in the channel, say), to post them in
    the chat instead."""
    try:
        for args in posts:
            await client.chat_postEphemeral(**args, user=user)
    except (SlackApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
        log.warning("slack: could not answer %s privately (%s)", user, type(exc).__name__)
        return False
    return True


async def tell(respond: AsyncRespond | None, text: str) -> None:
    """Show ``text`` to the person who made the request, to them alone; best effort."""
    if respond is None:
        return
    try:
        async with asyncio.timeout(NOTICE_TIMEOUT):
            answer = await respond(text=text, response_type="ephemeral", replace_original=False)
    except (SlackClientError, aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
        log.warning("slack: could not answer the person's request (%s)", type(exc).__name__)
        return
    if answer.status_code != 200:
        log.warning("slack: could not answer the person's request (HTTP %s)", answer.status_code)
