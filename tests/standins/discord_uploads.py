"""The Discord stand-in's uploads: ``POST /channels/{id}/messages`` as multipart form data, a
``payload_json`` part with the message and ``files[n]`` parts with the files, as Discord
takes them.

Checked as Discord checks them (after the failures a test queued, and the channel's bucket
for posting, as for messages): every file named in ``attachments`` by its index, each at most
the upload limit (10 MB for a bot in a server without boosts: 413, code 40005, "Request
entity too large"), the content at most 2,000 characters. The message the bot posted carries
its attachments (served from the stand-in's CDN), and the files are kept in ``received``.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

from aiohttp import web

from .uploads import ReceivedFile, content_type_of

if TYPE_CHECKING:
    from .discord import DiscordStandIn

MAX_UPLOAD_BYTES = 10 * 1024 * 1024
MAX_CONTENT_CHARS = 2000


class DiscordUploads:
    """The upload handler of one ``DiscordStandIn``, and the files it took."""

    def __init__(self, standin: DiscordStandIn) -> None:
        self.standin = standin
        self.received: list[ReceivedFile] = []
        self.limit = MAX_UPLOAD_BYTES

    async def post(self, request: web.Request) -> web.Response:
        from .discord import _json

        standin = self.standin
        form = await request.post()
        body = json.loads(str(form.get("payload_json") or "{}"))
        standin.requests.append(("POST", request.path, body))
        if not standin._authorized(request):
            return _json({"message": "401: Unauthorized", "code": 0}, status=401)
        channel_id = request.match_info["channel_id"]
        channel = standin._channel(channel_id)
        if channel is None:
            return _json({"message": "Unknown Channel", "code": 10003}, status=404)
        if standin.fail_sends:  # as for messages: a 429 with Retry-After, or a failure
            status, retry_after = standin.fail_sends.pop(0)
            if status != 429:
                return _json({"message": f"{status}: stand-in failure", "code": 0}, status=status)
            headers = standin._ratelimit_headers(0, retry_after)
            headers["Retry-After"] = str(math.ceil(retry_after))
            body = {"message": "You are being rate limited.", "retry_after": retry_after}
            return _json({**body, "global": False}, status=429, headers=headers)
        over = standin._over_bucket("post", channel_id)  # an upload is a message posted
        if over is not None:
            return over
        files = {key: value for key, value in form.items() if isinstance(value, web.FileField)}
        uploads = []
        for described in body.get("attachments") or []:
            part = files.get(f"files[{described.get('id')}]")
            if part is None:
                return _invalid("attachments", "ATTACHMENT_NOT_FOUND", "Unknown attachment.")
            data = part.file.read()
            if len(data) > self.limit:
                return _json({"message": "Request entity too large", "code": 40005}, status=413)
            uploads.append((str(described.get("filename") or part.filename), data))
        content = str(body.get("content") or "")
        if len(content) > MAX_CONTENT_CHARS:
            return _invalid("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.")
        if not uploads and not content.strip():
            return _json({"message": "Cannot send an empty message", "code": 50006}, status=400)
        attachments = [
            standin.add_file(channel_id, name, data, content_type_of(name, data))
            for name, data in uploads
        ]
        message = standin.message_payload(
            channel_id=channel_id,
            author=standin.bot_user,
            content=content,
            guild=channel["type"] != 1,
            attachments=attachments,
            channel_type=channel["type"],
        )
        standin.messages[message["id"]] = message
        thread = standin.threads.get(channel_id)
        for (name, data), attachment in zip(uploads, attachments, strict=True):
            self.received.append(
                ReceivedFile(
                    chat_id=str(thread["parent_id"]) if thread else channel_id,
                    name=name,
                    kind="attachment",
                    data=data,
                    caption=content,
                    content_type=attachment["content_type"],
                    thread_id=channel_id if thread else None,
                    after=len(standin.posted),
                )
            )
        standin.book.record(channel_id, "message")
        standin.sent_changed.set()
        await standin.publish("MESSAGE_CREATE", message)
        return _json(message, headers=standin._bucket_headers("post", channel_id))


def _invalid(field: str, code: str, message: str) -> web.Response:
    from .discord import _json

    errors = {field: {"_errors": [{"code": code, "message": message}]}}
    return _json({"message": "Invalid Form Body", "code": 50035, "errors": errors}, status=400)
