"""Editing a message the bot posted to Discord (an answered approval, a streamed reply's
preview): ``PATCH /channels/{id}/messages/{id}`` with the new content and no components;
and deleting one (a preview the reply no longer needs): ``DELETE`` of the same route.

An edit holds one message: a text that renders to more than Discord's 2000 characters is
refused here, before Discord would refuse it. Rate limits: discord.py waits itself, both
before a request whose bucket its headers report empty and after a 429 (``retry_after``, up
to five tries), so an edit may take that long; a 429 it gives up on reaches the chat's pacer
as ``RateLimitedError`` with Discord's wait. Discord accepts an edit that changes nothing.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import discord

from adapters.discord.sending import MAX_MESSAGE_CHARS, retry_after_of
from clawbot.channels.interface import ChannelLimits
from clawbot.channels.rendering import RenderedPart, render_parts
from clawbot.errors import DeliveryError, RateLimitedError
from clawbot.messages import OutboundDeletion, OutboundEdit


def one_part(text: str, limits: ChannelLimits) -> RenderedPart:
    """``text`` rendered as the one message an edit can hold; ``DeliveryError`` naming the
    limit when it renders to more (or to nothing)."""
    parts = render_parts(text, limits)
    if len(parts) != 1:
        raise DeliveryError(
            f"discord cannot show an edit of {len(text)} characters: it renders to "
            f"{len(parts)} messages and one holds at most {MAX_MESSAGE_CHARS} characters",
            hint="show the text up to the limit and send the rest as new messages",
        )
    return parts[0]


async def edit_message(
    target: discord.PartialMessageable, edit: OutboundEdit, arguments: dict[str, Any]
) -> None:
    """Rewrite the message ``edit`` names with ``arguments`` (content and allowed mentions)
    and no components; ``RateLimitedError`` when Discord still asks to wait once discord.py
    gave up, ``DeliveryError`` when it refuses (deleted, not the bot's, too long)."""
    message = target.get_partial_message(int(edit.message_id))
    where = f"edit message {edit.message_id} in chat {edit.chat_id}"
    try:
        await message.edit(
            content=arguments["content"], allowed_mentions=arguments["allowed_mentions"], view=None
        )
    except (discord.RateLimited, discord.HTTPException, aiohttp.ClientError, OSError) as exc:
        raise _refused(where, exc) from None


async def delete_message(target: discord.PartialMessageable, deletion: OutboundDeletion) -> None:
    """Delete the message ``deletion`` names (a bot may always delete its own);
    ``RateLimitedError`` when Discord still asks to wait once discord.py gave up,
    ``DeliveryError`` when it refuses (already deleted, not the bot's)."""
    message = target.get_partial_message(int(deletion.message_id))
    where = f"delete message {deletion.message_id} in chat {deletion.chat_id}"
    try:
        await message.delete()
    except (discord.RateLimited, discord.HTTPException, aiohttp.ClientError, OSError) as exc:
        raise _refused(where, exc) from None


def _refused(where: str, exc: Exception) -> DeliveryError:
    """Discord's refusal (or no answer: a connection error or timeout, an ``OSError``) as
    clawbot's: ``RateLimitedError`` for a 429."""
    if isinstance(exc, discord.RateLimited):
        wait = exc.retry_after
        return RateLimitedError(f"discord asked to wait {wait:g} s to {where}", wait)
    if isinstance(exc, discord.HTTPException):
        if exc.status == 429:
            wait = retry_after_of(exc)
            return RateLimitedError(f"discord asked to wait {wait:g} s to {where}", wait)
        return DeliveryError(
            f"discord refused to {where}: HTTP {exc.status} (code {exc.code}) {exc.text[:200]}"
        )
    return DeliveryError(f"could not reach discord to {where} ({type(exc).__name__})")
