"""Sending to Slack: a rendered part as ``chat.postMessage`` arguments, and the post of a
part that goes again as plain text when Slack refuses its formatting and waits out rate limits.

slack-sdk could retry a 429 itself (its ``RateLimitErrorRetryHandler``), but the adapter's
client has no retry handlers (a library retry after a lost response could post twice). So a
429 on a message's first part, when nothing was posted, is raised as ``RateLimitedError``
with Slack's ``Retry-After``: the chat's pacer waits that long and sends the message again.
A 429 on a later part is waited out here, a few times, since sending the whole message again
would post its first parts twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.buttons import blocks_for
from clawbot.channels.rendering import RenderedPart
from clawbot.errors import DeliveryError, RateLimitedError
from clawbot.messages import Action

log = logging.getLogger(__name__)

FORMATTING_ERRORS = frozenset(
    {"invalid_blocks", "invalid_blocks_format", "msg_too_long", "invalid_attachments"}
)
"""``chat.postMessage`` errors that mean "not this formatting"; the part goes again as plain."""


def part_to_post_args(
    chat_id: str, thread_id: str | None, part: RenderedPart, *, formatted: bool = True
) -> dict[str, Any]:
    """``chat.postMessage`` arguments for one rendered part.

    Plain text is sent with ``mrkdwn`` off, and still with ``& < >`` escaped: Slack parses
    ``<!channel>`` and ``<url|label>`` even then, and plain text must not ping a channel.
    """
    use_markup = formatted and part.markup == "slack_mrkdwn"
    text = part.text if use_markup else _escape(part.plain)
    args: dict[str, Any] = {"channel": chat_id, "text": text, "mrkdwn": use_markup}
    if thread_id:
        args["thread_ts"] = thread_id
    return args


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


async def post_part(
    client: AsyncWebClient,
    chat_id: str,
    thread_id: str | None,
    part: RenderedPart,
    actions: tuple[Action, ...] = (),
    *,
    attempts: int,
    max_wait: float,
    wait_out: bool = False,
) -> str:
    """Post one part; with ``actions``, as blocks with buttons. A part Slack refuses as
    formatted goes again as plain text, without blocks (its text names the commands). A
    429 is raised as ``RateLimitedError``, or with ``wait_out`` waited out (``attempts``
    times, each wait up to ``max_wait``)."""
    formatted = part.markup == "slack_mrkdwn"
    with_blocks = bool(actions)
    rate_limited = 0
    while True:
        args = part_to_post_args(chat_id, thread_id, part, formatted=formatted)
        if with_blocks:
            shown = args["text"] if args["mrkdwn"] else part.plain
            args["blocks"] = blocks_for(shown, actions, markup=args["mrkdwn"])
        try:
            response = await client.chat_postMessage(**args)
            return str(response.get("ts") or "")
        except SlackApiError as exc:
            error = error_code(exc)
            if is_rate_limited(exc):
                rate_limited += 1
                wait = retry_after_of(exc)
                if not wait_out or rate_limited >= attempts or wait > max_wait:
                    raise RateLimitedError(
                        f"Slack asked to wait {wait:g} s before posting to chat {chat_id}", wait
                    ) from None
                await asyncio.sleep(wait)
                continue
            if (formatted or with_blocks) and error in FORMATTING_ERRORS:
                log.info("slack: formatted part refused (%s); sending it as plain text", error)
                formatted = with_blocks = False
                continue
            raise DeliveryError(f"Slack refused a message to chat {chat_id} ({error})") from None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise DeliveryError(
                f"cannot reach Slack to deliver to chat {chat_id} ({type(exc).__name__})"
            ) from None


def is_rate_limited(exc: SlackApiError) -> bool:
    return exc.response.status_code == 429 or error_code(exc) == "ratelimited"


def retry_after_of(exc: SlackApiError) -> float:
    """Seconds Slack's ``Retry-After`` asks for (at least 0); 1 when it says none."""
    headers = exc.response.headers or {}
    for key, value in headers.items():
        if key.lower() == "retry-after":
            raw = value[0] if isinstance(value, list) else value
            try:
                return max(float(raw), 0.0)
            except (TypeError, ValueError):
                break
    return 1.0


def error_code(exc: SlackApiError) -> str:
    data = exc.response.data if exc.response is not None else None
    if isinstance(data, Mapping):
        return str(data.get("error") or "unknown_error")
    return f"HTTP {exc.response.status_code}" if exc.response is not None else "unknown_error"
