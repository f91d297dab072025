"""The Slack stand-in's external uploads, the three steps Slack has instead of one call:

1. ``files.getUploadURLExternal`` (``filename`` and ``length`` required; first the failures a
   test queued, as for messages: 429 with ``Retry-After``) answers a
   ``file_id`` and an ``upload_url`` served by the stand-in, good for one upload;
2. the bytes posted to that URL (raw, or as a multipart file part), at most the upload
   limit (1 GB: past it HTTP 413) and exactly ``length`` of them (else HTTP 400), answered
   ``OK - <size>`` as Slack does;
3. ``files.completeUploadExternal`` with the uploaded ``files`` (``[{"id", "title"}]``): an
   id never uploaded is ``file_not_found``; with a ``channel_id`` the file is shared there
   (in ``thread_ts`` if given) with ``initial_comment`` as its text, and kept in ``received``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .uploads import ReceivedFile, content_type_of

if TYPE_CHECKING:
    from .slack import SlackStandIn

MAX_UPLOAD_BYTES = 1024 * 1024 * 1024


@dataclass
class _Pending:
    file_id: str
    filename: str
    length: int
    data: bytes | None = None
    shared: list[str] = field(default_factory=list)


class SlackUploads:
    """The upload steps of one ``SlackStandIn``, and the files shared by them."""

    def __init__(self, standin: SlackStandIn) -> None:
        self.standin = standin
        self.received: list[ReceivedFile] = []
        self.limit = MAX_UPLOAD_BYTES
        self._pending: dict[str, _Pending] = {}
        self._tickets: dict[str, str] = {}

    def get_upload_url(self, args: dict[str, Any]) -> web.Response:
        from .slack import _ok_false

        standin = self.standin
        if standin._fail_queue:  # as for messages: 429 with Retry-After, or a failure
            status, retry_after = standin._fail_queue.pop(0)
            error = "ratelimited" if status == 429 else "internal_error"
            return _ok_false(error, status=status, headers={"Retry-After": f"{retry_after:g}"})
        filename = str(args.get("filename") or "")
        try:
            length = int(args.get("length") or 0)
        except ValueError:
            length = 0
        if not filename or length < 1:
            return _ok_false("invalid_arguments")
        file_id = self.standin.new_id("F")
        ticket = self.standin.new_id("u")
        self._pending[file_id] = _Pending(file_id, filename, length)
        self._tickets[ticket] = file_id
        url = f"{self.standin.base_url}/upload/v1/{ticket}"
        return web.json_response({"ok": True, "upload_url": url, "file_id": file_id})

    async def receive(self, request: web.Request) -> web.Response:
        """The upload URL: takes the bytes once."""
        file_id = self._tickets.pop(request.match_info["ticket"], None)
        if file_id is None:
            return web.Response(status=404, text="Not Found")
        pending = self._pending[file_id]
        if request.content_type == "multipart/form-data":
            form = await request.post()
            parts = [value for value in form.values() if isinstance(value, web.FileField)]
            data = parts[0].file.read() if parts else b""
        else:
            data = await request.read()
        if len(data) > self.limit:
            return web.Response(status=413, text="Request Entity Too Large")
        if len(data) != pending.length:
            return web.Response(status=400, text=f"length {pending.length} != {len(data)}")
        pending.data = data
        return web.Response(text=f"OK - {len(data)}")

    def complete(self, args: dict[str, Any]) -> web.Response:
        from .slack import _ok_false

        try:
            described = json.loads(str(args.get("files") or "[]"))
        except ValueError:
            return _ok_false("invalid_arguments")
        if not isinstance(described, list) or not described:
            return _ok_false("invalid_arguments")
        found = [self._pending.get(str(item.get("id"))) for item in described]
        uploads = [pending for pending in found if pending is not None and pending.data]
        if len(uploads) != len(found):
            return _ok_false("file_not_found")
        channel = str(args.get("channel_id") or "")
        thread = str(args.get("thread_ts") or "") or None
        comment = str(args.get("initial_comment") or "")
        files = []
        for pending, item in zip(uploads, described, strict=True):
            assert pending.data is not None
            shares: dict[str, Any] = {}
            if channel:
                ts = self.standin.next_ts()
                where = "private" if channel.startswith("D") else "public"
                shares[where] = {channel: [{"ts": ts, "channel_name": channel}]}
                self.received.append(
                    ReceivedFile(
                        chat_id=channel,
                        name=pending.filename,
                        kind="file",
                        data=pending.data,
                        caption=comment,
                        content_type=content_type_of(pending.filename, pending.data),
                        thread_id=thread,
                        after=len(self.standin.posted),
                    )
                )
            files.append(
                {
                    "id": pending.file_id,
                    "name": pending.filename,
                    "title": item.get("title") or pending.filename,
                    "mimetype": content_type_of(pending.filename, pending.data),
                    "size": len(pending.data),
                    "shares": shares,
                }
            )
            del self._pending[pending.file_id]
        self.standin._posted_changed.set()
        return web.json_response({"ok": True, "files": files})
