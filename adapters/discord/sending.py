"""Sending to Discord: a rendered part as ``Messageable.send`` arguments, the send of a part
that goes again escaped when Discord refuses it and waits out rate limits, and the notice
that a message was not taken in.

A part of a keyed answer (``OutboundMessage.idempotency_key``) carries a nonce derived from
the key: Discord, told to enforce it (discord.py sends ``enforce_nonce: true`` with every
nonce), returns the message it already created for that nonce within the last few minutes
instead of posting another. So an answer recovery sends again after a crash, not knowing
whether Discord took it before the process died, shows once.

Rate limits are discord.py's first: it reads each bucket's ``X-RateLimit-*`` headers and waits
before a request the bucket has no room for, and after a 429 it sleeps Discord's
``retry_after`` and tries again (five times). ``send_part`` adds its own tries on top for a
429 discord.py gave up on; when those run out too, ``RateLimitedError`` says how long Discord
asked to wait.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any

import aiohttp
import discord

from clawbot.channels.interface import NOT_TAKEN_IN
from clawbot.channels.rendering import RenderedPart
from clawbot.errors import DeliveryError, RateLimitedError
from clawbot.messages import InboundMessage

log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 2000
MAX_RETRY_AFTER = 60.0
NOTICE_TIMEOUT = 10.0
"""Seconds telling a chat that a message was lost may take before it is given up."""
_ALLOWED_MENTIONS = discord.AllowedMentions(everyone=False, roles=False, users=True)
"""An agent's reply may ping the people it names, never @everyone or a whole role."""
NONCE_BYTES = 12
"""A nonce's digest size: 24 hex characters, within Discord's 25."""


def part_nonce(key: str, index: int) -> str:
    """The nonce of part ``index`` of the answer keyed ``key``: the same at every sending of
    that part, by any process, and a different one for any other part or key."""
    return hashlib.blake2b(f"{key}/{index}".encode(), digest_size=NONCE_BYTES).hexdigest()


def outbound_arguments(
    part: RenderedPart,
    *,
    channel_id: int,
    reply_to_message_id: str | None = None,
    as_plain: bool = False,
    nonce: str | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``Messageable.send`` delivering one rendered part.

    Discord has no parse mode to switch off, so the plain fallback escapes the plain text's
    markdown characters (when that still fits) to make Discord show it literally. Without a
    ``nonce`` discord.py draws a random one (``part_nonce`` makes a repeat show once).
    """
    content = part.text
    if as_plain:
        escaped = discord.utils.escape_markdown(part.plain)
        content = escaped if len(escaped) <= MAX_MESSAGE_CHARS else part.plain
    arguments: dict[str, Any] = {"content": content, "allowed_mentions": _ALLOWED_MENTIONS}
    if nonce is not None:
        arguments["nonce"] = nonce
    if reply_to_message_id and reply_to_message_id.isdigit():
        arguments["reference"] = discord.MessageReference(
            message_id=int(reply_to_message_id),
            channel_id=channel_id,
            fail_if_not_exists=False,
        )
    return arguments


async def tell_not_taken_in(client: discord.Client | None, inbound: InboundMessage) -> None:
    """Answer a message (or press) clawbot could not store with the notice, straight through
    the client (the outbox may be what failed): Discord never delivers it again, and the next
    stored message moves the catch-up past it. Best effort."""
    target_id = inbound.thread_id or inbound.chat_id
    if client is None or client.is_closed() or not target_id.isdigit():
        return
    target = client.get_partial_messageable(int(target_id))
    notice = RenderedPart(text=NOT_TAKEN_IN, plain=NOT_TAKEN_IN, markup="plain")
    try:
        async with asyncio.timeout(NOTICE_TIMEOUT):
            await target.send(
                **outbound_arguments(
                    notice, channel_id=target.id, reply_to_message_id=inbound.message_id
                )
            )
    except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
        log.warning(
            "discord: could not tell chat %s that a message was lost (%s)",
            inbound.chat_id,
            type(exc).__name__,
        )


def retry_after_of(exc: discord.HTTPException) -> float:
    """Seconds a 429 asked to wait: its bucket's ``X-RateLimit-Reset-After`` (milliseconds,
    as precise as the body's ``retry_after``), else ``Retry-After``, else 1."""
    response = getattr(exc, "response", None)
    headers = response.headers if response is not None else {}
    for name in ("X-RateLimit-Reset-After", "Retry-After"):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except ValueError:
            continue
    return 1.0


async def send_part(
    target: discord.PartialMessageable,
    part: RenderedPart,
    reply_to: str | None,
    chat_id: str,
    view: discord.ui.View | None = None,
    *,
    attempts: int,
    nonce: str | None = None,
) -> discord.Message:
    """Post one part (as ``nonce``, when given: see ``part_nonce``). Only a 429 is retried:
    Discord stored nothing then, so a retry cannot duplicate; a timeout might have been
    stored, so it is reported instead of retried.

    A ``view`` (buttons) goes with the part; it is unregistered from discord.py's view store
    once sent, since presses are taken from ``on_interaction`` (``DiscordAdapter._press``)."""
    plain = part.markup == "plain" or part.text == part.plain
    delay = 1.0
    arguments = outbound_arguments(
        part, channel_id=target.id, reply_to_message_id=reply_to, nonce=nonce
    )
    for attempt in range(1, attempts + 1):
        if view is not None:
            arguments["view"] = view
        try:
            posted = await target.send(**arguments)
            if view is not None:
                view.stop()
            return posted
        except discord.RateLimited as exc:
            delay = exc.retry_after
        except discord.HTTPException as exc:
            if exc.status == 429:
                delay = retry_after_of(exc)
            elif exc.status == 400 and not plain:
                log.info(
                    "discord: formatted part refused for chat %s (code %s); sending it plain",
                    chat_id,
                    exc.code,
                )
                plain = True
                arguments = outbound_arguments(
                    part,
                    channel_id=target.id,
                    reply_to_message_id=reply_to,
                    as_plain=True,
                    nonce=nonce,
                )
                continue
            else:
                raise DeliveryError(
                    f"discord refused a message to chat {chat_id}: HTTP {exc.status} "
                    f"(code {exc.code}) {exc.text[:200]}"
                ) from None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise DeliveryError(
                f"could not reach discord to deliver to chat {chat_id} ({type(exc).__name__})"
            ) from None
        if attempt < attempts:
            log.warning("discord: rate limited on chat %s, retrying in %.2fs", chat_id, delay)
            await asyncio.sleep(min(delay, MAX_RETRY_AFTER))
    raise RateLimitedError(
        f"discord kept rate-limiting messages to chat {chat_id} after {attempts} attempts", delay
    )
