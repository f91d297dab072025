"""The Telegram stand-in's uploads: ``sendPhoto``, ``sendVoice``, ``sendAudio`` and
``sendDocument`` with the file as a multipart part, as the Bot API takes them.

Checked as Telegram checks them (after the failures a test queued, as for messages: a 429
with ``retry_after``, a caption's HTML refused; and the chat's flood budget, as a message):
the file must be an upload (a part with a file name), at most 50 MB (413 ``Request Entity
Too Large`` past it), a photo at most 10 MB and an image, a voice note OGG/Opus, MP3 or M4A,
audio MP3 or M4A; a caption at most 1,024 characters once its HTML is parsed (``message
caption is too long``), its HTML valid.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .uploads import ReceivedFile, content_type_of, is_audio, is_image, is_voice

if TYPE_CHECKING:
    from .telegram import TelegramStandIn

MAX_UPLOAD_BYTES = 50 * 1024 * 1024
MAX_PHOTO_BYTES = 10 * 1024 * 1024
MAX_CAPTION_UNITS = 1024
UPLOADS = {
    "sendphoto": "photo",
    "sendvoice": "voice",
    "sendaudio": "audio",
    "senddocument": "document",
}
"""Each upload method (as the stand-in looks methods up, in lower case) and its file's kind."""


@dataclass(frozen=True)
class Upload:
    """A file part of a multipart request."""

    filename: str
    content_type: str
    data: bytes


class TelegramUploads:
    """The upload methods of one ``TelegramStandIn``, and the files they took."""

    def __init__(self, standin: TelegramStandIn) -> None:
        self.standin = standin
        self.received: list[ReceivedFile] = []
        self.limit = MAX_UPLOAD_BYTES

    def method(self, name: str) -> Callable[[dict[str, Any]], Awaitable[Any]] | None:
        """The handler of the Bot API method ``name`` (lower case) if it is an upload."""
        kind = UPLOADS.get(name)
        return None if kind is None else functools.partial(self._upload, kind)

    async def _upload(self, kind: str, params: dict[str, Any]) -> Any:
        from .telegram import ApiError, _utf16_len, parse_telegram_html

        standin = self.standin
        if standin.fail_sends:  # as for messages: a 429 with retry_after, or a failure
            status, retry_after = standin.fail_sends.pop(0)
            if status == 429:
                wait = f"retry after {retry_after:g}"
                raise ApiError(429, f"Too Many Requests: {wait}", {"retry_after": retry_after})
            raise ApiError(status, "Internal Server Error")
        standin._flood_check(int(params["chat_id"]))  # a file is a message to the chat
        upload = params.get(kind)
        if not isinstance(upload, Upload):
            raise ApiError(400, f"Bad Request: there is no {kind} in the request")
        data = upload.data
        if len(data) > self.limit:
            raise ApiError(413, "Request Entity Too Large")
        if kind == "photo" and (len(data) > MAX_PHOTO_BYTES or not is_image(data)):
            raise ApiError(400, "Bad Request: IMAGE_PROCESS_FAILED")
        if kind == "voice" and not is_voice(data):
            raise ApiError(400, "Bad Request: wrong file type for a voice message")
        if kind == "audio" and not is_audio(data):
            raise ApiError(400, "Bad Request: wrong file type for an audio file")
        caption = str(params.get("caption") or "")
        if params.get("parse_mode") and standin.reject_formatting:
            standin.reject_formatting -= 1
            raise ApiError(400, "Bad Request: can't parse entities: Unsupported start tag")
        if str(params.get("parse_mode") or "").upper() == "HTML":
            caption = parse_telegram_html(caption)
        if _utf16_len(caption) > MAX_CAPTION_UNITS:
            raise ApiError(400, "Bad Request: message caption is too long")
        chat_id = int(params["chat_id"])
        thread = params.get("message_thread_id")
        message: dict[str, Any] = {
            "message_id": standin.next_message_id(),
            "from": standin.bot_user,
            "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"},
            "date": int(time.time()),
            kind: _file_object(kind, upload),
        }
        if caption:
            message["caption"] = caption
        standin.store_message(message)
        standin.book.record(str(chat_id), "message")
        self.received.append(
            ReceivedFile(
                chat_id=str(chat_id),
                name=upload.filename,
                kind=kind,
                data=data,
                caption=caption,
                content_type=content_type_of(upload.filename, data),
                thread_id=None if thread is None else str(thread),
                after=len(standin.sent),
            )
        )
        await standin._notify()
        return message


def _file_object(kind: str, upload: Upload) -> Any:
    stamp = f"{abs(hash(upload.data)) % 10**8:08d}"
    described = {
        "file_id": f"{kind}-{stamp}",
        "file_unique_id": stamp,
        "file_size": len(upload.data),
    }
    if kind == "photo":
        return [{**described, "width": 2, "height": 2}]
    if kind == "document":
        described["file_name"] = upload.filename
    return described
