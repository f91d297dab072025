"""discord.py's gateway as the adapter uses it: only the intents it reads, parsers that
skip a dispatch they cannot parse instead of ending the connection, and a session that opens
and closes apart from the REST login (a process that loses the leader lock closes its
session, as another may open one, and goes on sending)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import aiohttp
import discord

from clawbot.errors import ClawbotError

log = logging.getLogger(__name__)


def intents() -> discord.Intents:
    """Only what the adapter reads; message_content is privileged (see the module docstring)."""
    wanted = discord.Intents.none()
    wanted.guilds = True
    wanted.guild_messages = True
    wanted.dm_messages = True
    wanted.message_content = True
    return wanted


def guard_parsers(client: discord.Client) -> None:
    """Make a gateway dispatch the library cannot parse a logged skip, not a dead connection.

    discord.py has no hook for this: a KeyError in one of its parsers (say a MESSAGE_CREATE
    without ``content``) escapes ``Client.connect`` and ends the receive loop. So this wraps
    the entries of the state's parser table, a library internal.
    """
    parsers: dict[str, Callable[[Any], None]] = client._connection.parsers

    def guarded(event: str, parse: Callable[[Any], None]) -> Callable[[Any], None]:
        def run(data: Any) -> None:
            try:
                parse(data)
            except Exception as exc:
                log.warning(
                    "discord: skipped a malformed %s update (%s)", event, type(exc).__name__
                )

        return run

    for event, parse in list(parsers.items()):
        if event not in ("READY", "RESUMED"):
            parsers[event] = guarded(event, parse)


async def wait_ready(
    ready: asyncio.Event, receiving: asyncio.Task[None], *, timeout: float
) -> None:
    """Return once ``ready`` (Discord said READY); raise what ended ``receiving`` (the
    receive loop, ``Client.connect``) if it ended first, TimeoutError after ``timeout``."""
    said_ready = asyncio.ensure_future(ready.wait())
    try:
        done, _ = await asyncio.wait(
            {said_ready, receiving}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        said_ready.cancel()
    if said_ready in done:
        return
    if receiving in done:
        receiving.result()  # raises what ended the connection
        raise ClawbotError("the Discord gateway closed before it was ready")
    raise TimeoutError


async def close_session(
    client: discord.Client | None, receiving: asyncio.Task[None] | None, *, timeout: float
) -> None:
    """Close the gateway websocket of ``client`` and keep its REST login.

    discord.py closes the two only together (``Client.close``), except for a shard of an
    ``AutoShardedClient`` (``ShardInfo.disconnect``), and the adapter runs a plain
    ``Client``. So this does what that shard's close does, on library internals: cancel the
    receive loop (``receiving``, the task running ``Client.connect``) first, or it would
    reconnect after the close, then close ``Client.ws`` with 1000, which ends the session on
    Discord's side (no RESUME of it). A loop cancelled while it was reconnecting may leave
    a socket that said no IDENTIFY yet (no session); ``Client.close`` closes it at the end.
    """
    if receiving is not None:
        if not receiving.done():
            receiving.cancel()
        await asyncio.gather(receiving, return_exceptions=True)
    socket = client.ws if client is not None else None
    if socket is None or not socket.open:
        return
    try:
        await asyncio.wait_for(socket.close(code=1000), timeout=timeout)
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        log.warning("discord: closing the gateway failed (%s)", type(exc).__name__)
