"""Editing a message the bot posted to Discord (an answered approval, a streamed reply's
preview): ``PATCH /channels/{id}/messages/{id}`` with the new content and no components.

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
from clawbot.messages import OutboundEdit


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
    except discord.RateLimited as exc:
        raise RateLimitedError(
            f"discord asked to wait {exc.retry_after:g} s to {where}", exc.retry_after
        ) from None
    except discord.HTTPException as exc:
        if exc.status == 429:
            wait = retry_after_of(exc)
            raise RateLimitedError(f"discord asked to wait {wait:g} s to {where}", wait) from None
        raise DeliveryError(
            f"discord refused to {where}: HTTP {exc.status} (code {exc.code}) {exc.text[:200]}"
        ) from None
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise DeliveryError(
            f"could not reach discord to edit a message in chat {edit.chat_id} "
            f"({type(exc).__name__})"
        ) from None
