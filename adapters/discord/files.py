"""Sending files to Discord: a message with the file as its attachment (``discord.File``, a
multipart upload) and the caption as its content, rendered as Discord Markdown within the
2,000 characters of a message. Discord shows an image inline and plays audio in place, so
every kind is an attachment. A bot may upload 10 MB per file where the server has no boost.
"""

from __future__ import annotations

import asyncio
import io
import logging
from typing import Any

import aiohttp
import discord

from adapters.discord.sending import MAX_RETRY_AFTER, retry_after_of
from clawbot.channels.interface import ChannelLimits
from clawbot.channels.rendering import render_caption
from clawbot.errors import DeliveryError
from clawbot.messages import OutboundFile

log = logging.getLogger(__name__)

MAX_UPLOAD_BYTES = 10 * 1024 * 1024
_ALLOWED_MENTIONS = discord.AllowedMentions(everyone=False, roles=False, users=True)


def file_arguments(file: OutboundFile, limits: ChannelLimits) -> dict[str, Any]:
    """Keyword arguments for ``Messageable.send`` posting ``file`` (a fresh ``discord.File``
    each time: an upload reads it to its end)."""
    arguments: dict[str, Any] = {
        "file": discord.File(io.BytesIO(file.data), filename=file.name),
        "allowed_mentions": _ALLOWED_MENTIONS,
    }
    caption = render_caption(file.caption, limits)
    if caption is not None:
        arguments["content"] = caption.text
    return arguments


async def send_file(
    target: discord.PartialMessageable, file: OutboundFile, limits: ChannelLimits, *, attempts: int
) -> discord.Message:
    """Post ``file``; only a 429 is tried again (Discord stored nothing then)."""
    for attempt in range(1, attempts + 1):
        try:
            return await target.send(**file_arguments(file, limits))
        except discord.RateLimited as exc:
            delay = exc.retry_after
        except discord.HTTPException as exc:
            if exc.status != 429:
                raise DeliveryError(
                    f"discord refused {file.name!r} for chat {file.chat_id}: HTTP {exc.status} "
                    f"(code {exc.code}) {exc.text[:200]}"
                ) from None
            delay = retry_after_of(exc)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise DeliveryError(
                f"could not reach discord to send {file.name!r} ({type(exc).__name__})"
            ) from None
        if attempt < attempts:
            log.warning("discord: rate limited on chat %s, retrying in %.2fs", file.chat_id, delay)
            await asyncio.sleep(min(delay, MAX_RETRY_AFTER))
    raise DeliveryError(f"discord kept rate-limiting files to chat {file.chat_id}")
