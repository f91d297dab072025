"""Editing a message the bot posted to Slack (an answered approval, a streamed reply's
preview): ``chat.update`` with the text in section blocks and no actions block, so its
buttons are gone, and the text again as the notification fallback. ``chat.delete`` takes
one away (a preview the reply no longer needs; Tier 3 as well).

An edit holds one message: a text that renders to more than one part (4000 characters) is
refused here. ``chat.update`` is Tier 3 (50+ a minute per workspace); a 429 is not waited out
here but raised as ``RateLimitedError`` with Slack's ``Retry-After``, so the chat's pacer
waits and a streamed preview shows its newest text then. Slack accepts an update that changes
nothing.
"""

from __future__ import annotations

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.buttons import sections_for
from adapters.slack.sending import error_code, is_rate_limited, part_to_post_args, retry_after_of
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
            f"slack cannot show an edit of {len(text)} characters: it renders to "
            f"{len(parts)} messages and one holds at most {limits.max_message_chars} characters",
            hint="show the text up to the limit and send the rest as new messages",
        )
    return parts[0]


async def update(client: AsyncWebClient, edit: OutboundEdit, part: RenderedPart) -> None:
    """``chat.update`` the message ``edit`` names to ``part``: its text in sections only (the
    blocks replace the old ones, so its buttons are gone; plain when it goes without markup,
    as a post does), and as the notification fallback."""
    args = part_to_post_args(edit.chat_id, None, part)
    text, markup = str(args["text"]), bool(args["mrkdwn"])
    where = f"update message {edit.message_id} in chat {edit.chat_id}"
    try:
        await client.chat_update(
            channel=edit.chat_id,
            ts=edit.message_id,
            text=text,
            blocks=sections_for(text if markup else part.plain, markup=markup),
        )
    except SlackApiError as exc:
        if is_rate_limited(exc):
            wait = retry_after_of(exc)
            raise RateLimitedError(f"Slack asked to wait {wait:g} s to {where}", wait) from None
        error = error_code(exc)
        if error == "msg_too_long":
            raise DeliveryError(
                f"Slack refused to {where}: the text is over its 40,000-character limit",
                hint="show the text up to the limit and send the rest as new messages",
            ) from None
        raise DeliveryError(f"Slack refused to {where} ({error})") from None
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise DeliveryError(
            f"cannot reach Slack to update a message in chat {edit.chat_id} ({type(exc).__name__})"
        ) from None


async def delete_message(client: AsyncWebClient, deletion: OutboundDeletion) -> None:
    """``chat.delete`` the message ``deletion`` names (a bot token deletes the bot's own);
    ``RateLimitedError`` when Slack asks to wait, ``DeliveryError`` when it refuses."""
    where = f"delete message {deletion.message_id} in chat {deletion.chat_id}"
    try:
        await client.chat_delete(channel=deletion.chat_id, ts=deletion.message_id)
    except SlackApiError as exc:
        if is_rate_limited(exc):
            wait = retry_after_of(exc)
            raise RateLimitedError(f"Slack asked to wait {wait:g} s to {where}", wait) from None
        raise DeliveryError(f"Slack refused to {where} ({error_code(exc)})") from None
    except (aiohttp.ClientError, OSError) as exc:
        raise DeliveryError(f"cannot reach Slack to {where} ({type(exc).__name__})") from None
