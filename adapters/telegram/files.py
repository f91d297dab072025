"""Sending files to Telegram: ``sendPhoto``, ``sendVoice``, ``sendAudio`` or ``sendDocument``
by the file's kind (an upload PTB sends as multipart form data), the caption rendered as
Telegram HTML within its 1,024 characters, plain when Telegram refuses the markup, flood
control raised as ``RateLimitedError`` for the chat's pacer to wait out, as for messages.

Telegram's limits for a bot: 50 MB per uploaded file, 10 MB per photo (a bigger image goes
as a document, which Telegram shows with a preview).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from telegram import Message
from telegram.constants import ParseMode
from telegram.error import BadRequest, TelegramError

from adapters.telegram.sending import (
    MAX_SEND_ATTEMPTS,
    _is_parse_error,
    api_chat_id,
    flood_wait,
)
from clawbot.channels.interface import ChannelLimits
from clawbot.channels.rendering import RenderedPart, render_caption
from clawbot.errors import DeliveryError, RateLimitedError
from clawbot.messages import FileKind, OutboundFile

log = logging.getLogger(__name__)

MAX_UPLOAD_BYTES = 50 * 1024 * 1024
MAX_PHOTO_BYTES = 10 * 1024 * 1024
MAX_CAPTION_CHARS = 1024
METHODS: dict[FileKind, tuple[str, str]] = {
    "photo": ("send_photo", "photo"),
    "voice": ("send_voice", "voice"),
    "audio": ("send_audio", "audio"),
    "document": ("send_document", "document"),
}
"""The Bot method for each kind, and the name of its file parameter."""


def file_to_send_kwargs(
    file: OutboundFile, caption: RenderedPart | None, *, plain: bool = False
) -> tuple[str, dict[str, Any]]:
    """The ``Bot`` method and its arguments for ``file``; ``plain``: the caption's plain
    text after Telegram refused its HTML."""
    kind: FileKind = file.kind
    if kind == "photo" and len(file.data) > MAX_PHOTO_BYTES:
        kind = "document"
    method, field = METHODS[kind]
    kwargs: dict[str, Any] = {
        "chat_id": api_chat_id(file.chat_id),
        field: file.data,
        "filename": file.name,
    }
    if caption is not None:
        formatted = caption.markup == "telegram_html" and not plain
        kwargs["caption"] = caption.text if formatted else caption.plain
        if formatted:
            kwargs["parse_mode"] = ParseMode.HTML
    if file.thread_id:
        kwargs["message_thread_id"] = int(file.thread_id)
    return method, kwargs


async def send_file(
    bot: Any, file: OutboundFile, limits: ChannelLimits, *, scrub: Callable[[str], str]
) -> Message:
    """Upload one file; only what Telegram certainly did not post is sent again (a caption
    refused as HTML, as plain text). Flood control is raised as ``RateLimitedError``."""
    caption = render_caption(file.caption, limits)
    plain = False
    for _attempt in range(MAX_SEND_ATTEMPTS):
        method, kwargs = file_to_send_kwargs(file, caption, plain=plain)
        try:
            result: Message = await getattr(bot, method)(**kwargs)
            return result
        except BadRequest as exc:
            if not plain and "parse_mode" in kwargs and _is_parse_error(exc):
                log.info("telegram: chat %s refused a caption's formatting", file.chat_id)
                plain = True
                continue
            raise _refused(file, scrub(exc.message)) from None
        except TelegramError as exc:
            wait = flood_wait(exc)
            if wait is None:
                raise _refused(file, scrub(exc.message)) from None
            raise RateLimitedError(  # nothing was posted: the chat's pacer waits, sends again
                f"telegram asked to wait {wait:g} s before taking {file.name!r} for chat "
                f"{file.chat_id}",
                wait,
            ) from None
    raise _refused(file, f"still failing after {MAX_SEND_ATTEMPTS} tries")


def _refused(file: OutboundFile, detail: str) -> DeliveryError:
    return DeliveryError(f"telegram did not take {file.name!r} for chat {file.chat_id}: {detail}")
