"""Sending to Telegram: one rendered part as ``sendMessage`` arguments, and the send of a
part that falls back to plain text when Telegram rejects the HTML and waits out rate limits.

python-telegram-bot does not wait out flood control itself (only with its optional
``AIORateLimiter``, which clawbot does not use: the chat's pacer keeps Telegram's pace). So a
429 on a message's first part, when nothing was posted, is raised as ``RateLimitedError``
with Telegram's ``retry_after``: the pacer waits that long and sends the message again. A
429 on a later part is waited out here (up to ``MAX_RETRY_AFTER``), since sending the whole
message again would post its first parts twice.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from telegram import Message, ReplyParameters
from telegram.constants import ParseMode
from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError

from adapters.telegram.buttons import keyboard
from clawbot.channels.rendering import RenderedPart
from clawbot.errors import DeliveryError, RateLimitedError
from clawbot.messages import OutboundMessage

log = logging.getLogger(__name__)

MAX_SEND_ATTEMPTS = 5
MAX_RETRY_AFTER = 60.0
"""A longer server-requested pause would stall the turn; fail visibly instead."""

_CHAT_ID_RE = re.compile(r"-?\d+")
_RETRY_IN_RE = re.compile(r"retry (?:after|in) (\d+(?:\.\d+)?)", re.IGNORECASE)


def part_to_send_kwargs(
    part: RenderedPart,
    message: OutboundMessage,
    *,
    first: bool,
    plain: bool = False,
    last: bool = False,
) -> dict[str, Any]:
    """Arguments for ``Bot.send_message`` for one rendered part.

    Only the first part replies to the user's message (in a group; a DM shows no quote); the
    rest follow it in order, and the last carries the message's buttons (under the text they
    belong to).
    ``plain`` selects the part's plain-text fallback (after Telegram rejected the HTML).
    """
    formatted = part.markup == "telegram_html" and not plain
    kwargs: dict[str, Any] = {
        "chat_id": api_chat_id(message.chat_id),
        "text": part.text if formatted or part.markup == "plain" else part.plain,
    }
    if formatted:
        kwargs["parse_mode"] = ParseMode.HTML
    if message.thread_id:
        kwargs["message_thread_id"] = int(message.thread_id)
    reply_to = message.reply_to_message_id
    in_a_group = not message.chat_id.isdigit()  # a person's own chat has a positive id
    if first and in_a_group and reply_to and reply_to.isdigit():
        kwargs["reply_parameters"] = ReplyParameters(
            message_id=int(reply_to), allow_sending_without_reply=True
        )
    markup = keyboard(message.actions) if last and message.actions else None
    if markup is not None:
        kwargs["reply_markup"] = markup
    return kwargs


def api_chat_id(chat_id: str) -> int | str:
    """Numeric ids as ints; ``@channelusername`` stays a string."""
    return int(chat_id) if _CHAT_ID_RE.fullmatch(chat_id) else chat_id


def _is_parse_error(exc: TelegramError) -> bool:
    return "parse entities" in exc.message.lower()


def flood_wait(exc: TelegramError) -> float | None:
    """Seconds Telegram asked us to wait, or None if this is not a rate limit.

    PTB raises RetryAfter only for a truthy ``retry_after``; a 429 with ``retry_after: 0``
    surfaces as a NetworkError whose message starts "Too Many Requests".
    """
    if isinstance(exc, RetryAfter):
        value = exc.retry_after
        return value.total_seconds() if isinstance(value, timedelta) else float(value)
    if isinstance(exc, NetworkError) and exc.message.lower().startswith("too many requests"):
        match = _RETRY_IN_RE.search(exc.message)
        return float(match.group(1)) if match else 1.0
    return None


async def send_part(
    bot: Any,
    part: RenderedPart,
    message: OutboundMessage,
    *,
    first: bool,
    last: bool,
    scrub: Callable[[str], str],
    wait_out: bool = False,
) -> Message:
    """Send one part: plain re-send on rejected markup; flood control raised as
    ``RateLimitedError``, or with ``wait_out`` waited out (a bounded number of times).

    Only errors where Telegram certainly did not post the message are retried, so a retry
    never duplicates one.
    """
    plain = False
    for _attempt in range(MAX_SEND_ATTEMPTS):
        kwargs = part_to_send_kwargs(part, message, first=first, plain=plain, last=last)
        try:
            result: Message = await bot.send_message(**kwargs)
            return result
        except BadRequest as exc:
            if not plain and "parse_mode" in kwargs and _is_parse_error(exc):
                log.info(
                    "telegram: chat %s rejected formatting (%s); sending plain text",
                    message.chat_id,
                    exc.message,
                )
                plain = True
                continue
            raise delivery_error(message, exc, scrub) from None
        except TelegramError as exc:
            wait = flood_wait(exc)
            if wait is None:
                raise delivery_error(message, exc, scrub) from None
            if not wait_out or wait > MAX_RETRY_AFTER:
                raise RateLimitedError(
                    f"telegram asked to wait {wait:g} s before posting to chat {message.chat_id}",
                    wait,
                ) from None
            log.info("telegram: rate limited in chat %s; retrying in %.1fs", message.chat_id, wait)
            await asyncio.sleep(wait)
    raise delivery_error(message, None, scrub, f"still failing after {MAX_SEND_ATTEMPTS} tries")


def delivery_error(
    message: OutboundMessage,
    exc: TelegramError | None,
    scrub: Callable[[str], str],
    reason: str = "",
) -> DeliveryError:
    detail = reason or (scrub(exc.message) if exc is not None else "unknown error")
    return DeliveryError(f"telegram could not deliver to chat {message.chat_id}: {detail}")
