"""The common message shape: what every channel turns its updates into, and what the
runtime hands back for delivery, plus the provider-neutral content blocks of a transcript.

All models are frozen: a message is a fact, functions return new ones instead of editing.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

INTERNAL_CHANNEL = "internal"
"""The reserved channel of agent-to-agent traffic; the outbox never delivers it externally."""

ChatType = Literal["dm", "group", "channel"]
Role = Literal["user", "assistant", "tool", "system"]
FileKind = Literal["photo", "voice", "audio", "document"]
"""How a chat should show a file the bot sends: a picture, a voice note, a track to play, or
a file to download. Each adapter maps it to its platform's call."""


def utcnow() -> datetime:
    return datetime.now(UTC)


def well_formed(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD. JSON may carry one
    (``"\\ud800"`` from a platform or a provider) and Python decodes it, but it has no UTF-8
    form: stored or sent on as it is, it fails the write, and the same message again."""
    if text.isascii():
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)
    return text


Text = Annotated[str, AfterValidator(well_formed)]
"""A string that can be encoded as UTF-8, whatever the JSON it came from held."""


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Attachment(Frozen):
    """A file that came with a message; fetched on demand through its adapter, never eagerly."""

    name: Text
    mime_type: str = "application/octet-stream"
    size: int | None = None
    ref: str = Field(description="adapter-specific handle used to fetch the bytes on demand")
    duration: float | None = None
    """Seconds of sound, for a voice note or audio file whose platform says (never
    measured: the bytes are fetched only when the turn needs them)."""
    voice: bool = False
    """A voice note recorded in the chat, rather than an audio file sent as one."""


class ReplyContext(Frozen):
    """The message an inbound message replies to, kept as context for the turn."""

    message_id: str
    sender_name: Text = ""
    text: Text = ""
    from_bot: bool = False


class InboundMessage(Frozen):
    """One chat message from any channel, normalized."""

    channel: str
    chat_id: str
    chat_type: ChatType = "dm"
    thread_id: str | None = None
    sender_id: str
    sender_name: Text = ""
    text: Text
    message_id: str | None = None
    mentioned: bool = False
    reply_to: ReplyContext | None = None
    attachments: tuple[Attachment, ...] = ()
    received_at: datetime = Field(default_factory=utcnow)


class Action(Frozen):
    """A button under a message. Pressing it is the same as the presser sending
    ``command`` in that chat (so who may press it is checked like any command); a channel
    without buttons shows the command in the text instead."""

    label: str
    command: str


class OutboundMessage(Frozen):
    """A reply on its way out. Only the outbox's delivery gate turns it into a platform call."""

    channel: str
    chat_id: str
    text: Text
    thread_id: str | None = None
    reply_to_message_id: str | None = None
    session_key: str = ""
    deliver: bool = True
    kind: Literal["reply", "notice", "error"] = "reply"
    actions: tuple[Action, ...] = ()
    private_to: str | None = None
    """A sender to show this to alone, where the channel can (a Slack ephemeral message, the
    answer to the Telegram button press or the Discord interaction ``reply_to_message_id``
    names); elsewhere it is sent like any reply. For answers only their asker needs."""
    idempotency_key: str | None = None
    """The same each time one answer is sent (its job's id): a reply sent again after a crash
    (recovery cannot tell whether the platform took it) carries the key it went out with,
    and a channel whose platform offers idempotent sends (Discord's ``nonce``) shows it
    once."""


class OutboundEdit(Frozen):
    """A message the bot sent, rewritten in place: its text replaced and its buttons removed
    (an approval request once answered). Passes the outbox's gate like a new message."""

    channel: str
    chat_id: str
    message_id: str
    text: Text
    thread_id: str | None = None
    session_key: str = ""
    deliver: bool = True


class OutboundDeletion(Frozen):
    """A message the bot sent, taken back (a streamed reply's preview the reply no longer
    needs). Passes the outbox's gate like a new message."""

    channel: str
    chat_id: str
    message_id: str
    thread_id: str | None = None
    session_key: str = ""
    deliver: bool = True


class OutboundFile(Frozen):
    """A file on its way out (``send_file``, a reply read aloud): its bytes, how the chat
    should show it and a caption in Markdown. It passes the outbox's gate as a message
    does; the adapter picks the platform call by ``kind``."""

    channel: str
    chat_id: str
    name: str
    data: bytes = Field(repr=False)
    kind: FileKind = "document"
    mime_type: str = "application/octet-stream"
    caption: str = ""
    thread_id: str | None = None
    session_key: str = ""
    deliver: bool = True


class TextBlock(Frozen):
    type: Literal["text"] = "text"
    text: Text


class ToolCallBlock(Frozen):
    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)

    @property
    def signature(self) -> str:
        """The tool and its arguments, key order aside: two calls alike have the same one
        (what repeat detection and an approval's call key compare)."""
        return f"{self.name}:{json.dumps(self.arguments, sort_keys=True, default=str)}"


class ToolResultBlock(Frozen):
    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    name: str
    content: Text
    is_error: bool = False


class AttachmentBlock(Frozen):
    """A file a person sent, kept in the transcript as a reference to the platform's copy,
    never as its bytes: a turn that needs the bytes fetches them again through the channel
    (``clawbot.media``), and a copy the platform no longer has is said to be gone."""

    type: Literal["attachment"] = "attachment"
    channel: str
    ref: str
    name: str
    mime_type: str = "application/octet-stream"
    size: int | None = None
    duration: float | None = None
    voice: bool = False

    @classmethod
    def of(cls, channel: str, attachment: Attachment) -> AttachmentBlock:
        return cls(
            channel=channel,
            ref=attachment.ref,
            name=attachment.name,
            mime_type=attachment.mime_type,
            size=attachment.size,
            duration=attachment.duration,
            voice=attachment.voice,
        )

    @property
    def attachment(self) -> Attachment:
        """The attachment as its channel fetches it."""
        return Attachment(
            name=self.name,
            mime_type=self.mime_type,
            size=self.size,
            ref=self.ref,
            duration=self.duration,
            voice=self.voice,
        )

    @property
    def label(self) -> str:
        """The line the model sees where the file was sent (what it is, never its bytes)."""
        kind = self.mime_type.split("/", 1)[0]
        length = f", {round(self.duration)} s" if self.duration is not None else ""
        if self.voice:
            return f"[voice note{length}]"
        if kind == "audio":
            return f"[audio: {self.name}{length}]"
        what = "image" if kind == "image" else "file"
        size = f", {human_size(self.size)}" if self.size is not None else ""
        return f"[{what}: {self.name} ({self.mime_type}{size})]"


def human_size(size: int) -> str:
    """``1536`` -> ``"1.5 KB"``: a size as people read it (powers of 1000, as platforms do)."""
    if size < 1000:
        return f"{size} bytes"
    amount, unit = (size / 1000, "KB") if size < 999_950 else (size / 1_000_000, "MB")
    return f"{amount:.1f} {unit}".replace(".0 ", " ")


ContentBlock = Annotated[
    TextBlock | ToolCallBlock | ToolResultBlock | AttachmentBlock, Field(discriminator="type")
]


class Provenance(Frozen):
    """Where a transcript entry came from: who said it, through which channel."""

    channel: str = ""
    sender_id: str = ""
    sender_name: str = ""
    message_id: str | None = None
    source: Literal["user", "agent", "command", "system", "internal"] = "user"


class TranscriptEntry(Frozen):
    """One message of a session's history, as stored."""

    role: Role
    content: tuple[ContentBlock, ...]
    provenance: Provenance = Field(default_factory=Provenance)
    meta: dict[str, Any] = Field(default_factory=dict)
    turn_id: str | None = None
    created_at: datetime = Field(default_factory=utcnow)

    @property
    def text(self) -> str:
        """The entry's text blocks joined; tool blocks are left out."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_calls(self) -> tuple[ToolCallBlock, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolCallBlock))

    @property
    def attachments(self) -> tuple[AttachmentBlock, ...]:
        """The files sent with this message, as references."""
        return tuple(b for b in self.content if isinstance(b, AttachmentBlock))

    @property
    def shown_text(self) -> str:
        """What the model reads of the entry: its text, then a line naming each file sent
        with it (the file itself is added per request, where it can be; see
        ``clawbot.media``)."""
        content = self.content
        if len(content) == 1 and isinstance(content[0], TextBlock):
            return content[0].text
        attached = self.attachments
        text = self.text
        if not attached:
            return text
        labels = [a.label for a in attached]
        return "\n".join([text, *labels] if text else labels)


def parse_command(text: str) -> tuple[str, str] | None:
    """``"/model gpt-4o"`` -> ``("model", "gpt-4o")``; None when the text is not a command.

    ``/cmd@botname`` (Telegram's group form) names the same command.
    """
    stripped = text.strip()
    if not stripped.startswith("/") or len(stripped) < 2 or stripped[1] in "/ ":
        return None
    head, _, rest = stripped[1:].partition(" ")
    name = head.split("@", 1)[0].lower()
    if not name.replace("_", "").replace("-", "").isalnum():
        return None
    return name, rest.strip()
