"""The ``send_file`` tool: a workspace file sent to the person's chat.

The file is opened as every file tool opens one (:func:`clawbot.tools.files.file_bytes`:
beneath the workspace's root, the session's reach checked on the walk, so a link swapped in
meanwhile leads nowhere), read whole within the platform's limit, and handed to the outbox's
gate as an :class:`~clawbot.messages.OutboundFile`: an internal session (a subagent's)
reaches no platform, as with every message. Its first bytes say how the chat shows it
(:mod:`clawbot.channels.file_kinds`); the adapter picks the platform's call.

Guarded: under the default (supervised) autonomy a person approves it once per session.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Annotated, Any

from pydantic import Field

from clawbot.agents.workspace import shown_path
from clawbot.channels.file_kinds import HEAD_BYTES, file_kind
from clawbot.channels.outbox import Outbox
from clawbot.errors import ToolError
from clawbot.messages import FileKind, OutboundFile
from clawbot.tools.files import file_bytes, file_size, too_big
from clawbot.tools.registry import Tool, ToolContext, make_tool

MAX_SEND_BYTES = 50 * 1024 * 1024
"""The most clawbot sends in one file, whatever the platform takes: it holds the file in
memory while it goes out."""
SHOWN_AS: dict[FileKind, str] = {
    "photo": "a photo",
    "voice": "a voice note",
    "audio": "audio",
    "document": "a document",
}


@dataclass(frozen=True)
class UploadLimit:
    """The most one file may hold on its way to a channel, and how to name that limit."""

    max_bytes: int
    text: str


def upload_limit(outbox: Outbox, channel: str) -> UploadLimit:
    """The smaller of the channel's limit for a bot's files and clawbot's own."""
    adapter = outbox.adapter(channel)
    platform = adapter.limits.max_upload_bytes if adapter is not None else MAX_SEND_BYTES
    if 0 < platform <= MAX_SEND_BYTES:
        return UploadLimit(platform, f"{channel.title()}'s limit of {_size(platform)} per file")
    return UploadLimit(MAX_SEND_BYTES, f"clawbot's limit of {_size(MAX_SEND_BYTES)} per file")


def _size(count: int) -> str:
    return f"{count / 1024 / 1024:g} MB"


def printable_name(name: str) -> str:
    """``name`` with control and format characters shown as ``_``: a newline would break an
    upload's headers, and a right-to-left mark would disguise the name's extension."""
    return "".join(ch if ch.isprintable() else "_" for ch in name)


def send_file_tool(outbox: Outbox) -> Tool:
    """The ``send_file`` tool, bound to one bot's outbox."""

    async def send_file(
        path: Annotated[str, Field(description="file path relative to the workspace")],
        ctx: ToolContext,
        caption: Annotated[
            str, Field(description="a short text shown with the file (Markdown); may be empty")
        ] = "",
    ) -> str:
        """Send a workspace file to the person's chat: JPEG, PNG and WebP images show as
        photos, OGG/Opus as a voice note, MP3 and M4A as audio, anything else as a document.

        Only in a conversation with a person: a subagent reports the path to its parent."""
        session = ctx.session
        limit = upload_limit(outbox, session.channel)
        data = await file_bytes(ctx, path, limit.max_bytes, limit.text)
        name = printable_name(PurePosixPath(path).name)
        kind, mime_type = file_kind(data[:HEAD_BYTES], name)
        delivery = await outbox.send_file(
            OutboundFile(
                channel=session.channel,
                chat_id=session.chat_id,
                thread_id=session.thread_id,
                session_key=session.key,
                deliver=session.deliver,
                name=name,
                data=data,
                kind=kind,
                mime_type=mime_type,
                caption=caption.strip(),
            )
        )
        if delivery.status == "withheld":
            raise ToolError(
                "this conversation reaches no chat (a subagent's, or one that does not "
                "deliver), so the file was not sent",
                hint="name the file's path in your answer instead",
            )
        if delivery.status == "failed":
            raise ToolError(f"{name} was not sent: {delivery.error}")
        return f"Sent {name} to the chat as {SHOWN_AS[kind]} ({len(data):,} bytes)."

    async def precheck(arguments: Any, ctx: ToolContext) -> None:
        """Within reach, a plain file, and not too big: nobody approves a send that fails."""
        limit = upload_limit(outbox, ctx.session.channel)
        size = await file_size(ctx, arguments.path)
        if size > limit.max_bytes:
            raise too_big(shown_path(arguments.path), size, limit.text)

    return make_tool(send_file, risk="guarded", groups=("group:files",), precheck=precheck)
