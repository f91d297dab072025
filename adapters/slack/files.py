"""Sending files to Slack: slack-sdk's ``files_upload_v2``, which is Slack's external upload
in three steps (``files.getUploadURLExternal`` for an upload URL, the bytes posted to that
URL, ``files.completeUploadExternal`` sharing the file into the channel, or the thread, with
the caption as its ``initial_comment`` in mrkdwn).

Slack shows an image inline and plays audio in place, so every kind is a file. A rate limit
on any step is raised as ``RateLimitedError`` with Slack's ``Retry-After``: a file not yet
completed was shared nowhere, so the chat's pacer starts the upload again once the wait is
over, and that never posts it twice.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.sending import error_code, is_rate_limited, retry_after_of
from clawbot.channels.interface import ChannelLimits
from clawbot.channels.rendering import render_caption
from clawbot.errors import DeliveryError, RateLimitedError
from clawbot.messages import OutboundFile

log = logging.getLogger(__name__)

MAX_UPLOAD_BYTES = 1024 * 1024 * 1024
"""Slack takes files of up to 1 GB."""


def upload_arguments(file: OutboundFile, limits: ChannelLimits) -> dict[str, Any]:
    """``files_upload_v2`` arguments for ``file``."""
    arguments: dict[str, Any] = {
        "file": file.data,
        "filename": file.name,
        "title": file.name,
        "channel": file.chat_id,
    }
    caption = render_caption(file.caption, limits)
    if caption is not None:
        arguments["initial_comment"] = caption.text
    if file.thread_id:
        arguments["thread_ts"] = file.thread_id
    return arguments


async def upload(client: AsyncWebClient, file: OutboundFile, limits: ChannelLimits) -> str | None:
    """Share ``file`` into its channel; the ``ts`` of the message that shows it, where
    Slack said (it may share a file in a moment, after it answered). A 429 is raised as
    ``RateLimitedError`` with Slack's ``Retry-After``: nothing was shared, so the chat's
    pacer waits that long and sends it again."""
    try:
        response = await client.files_upload_v2(**upload_arguments(file, limits))
    except SlackApiError as exc:
        if is_rate_limited(exc):
            wait = retry_after_of(exc)
            raise RateLimitedError(
                f"Slack asked to wait {wait:g} s before taking {file.name!r} for chat "
                f"{file.chat_id}",
                wait,
            ) from None
        raise DeliveryError(
            f"Slack refused {file.name!r} for chat {file.chat_id} ({error_code(exc)})"
        ) from None
    except SlackRequestError as exc:  # the upload URL refused the bytes
        raise DeliveryError(
            f"Slack refused {file.name!r} for chat {file.chat_id}: {_upload_refusal(exc)}"
        ) from None
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise DeliveryError(
            f"cannot reach Slack to send {file.name!r} ({type(exc).__name__})"
        ) from None
    return _share_ts(response.get("file") or {}, file.chat_id)


def _upload_refusal(exc: SlackRequestError) -> str:
    """What the upload URL's answer meant (slack-sdk words it as one sentence with the
    HTTP status inside)."""
    found = re.search(r"status: (\d+)", str(exc))
    if found is None:
        return str(exc)[:200]
    if found.group(1) == "413":
        return "the file is too large for Slack (HTTP 413)"
    return f"its upload URL answered HTTP {found.group(1)}"


def _share_ts(shared: dict[str, Any], chat_id: str) -> str | None:
    """The ``ts`` of the file's first share in ``chat_id`` (``shares.public`` in a public
    channel, ``shares.private`` in a private one or a DM)."""
    for where in ("public", "private"):
        places = (shared.get("shares") or {}).get(where) or {}
        for share in places.get(chat_id) or []:
            if share.get("ts"):
                return str(share["ts"])
    return None
