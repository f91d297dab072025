"""What kind of file an attachment is, and so what becomes of it: an image a vision model
is shown, audio to transcribe, a document to save, or something the bot does not take.

The platform's MIME type decides, or the file's name when the platform gave only a generic
type (``application/octet-stream``), as Discord and Telegram do for some files. A file
neither says is taken (no extension, or a type such as ``application/x-sh`` for a script) may
still be text: its bytes decide once downloaded (:func:`looks_like_text`).
"""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass
from typing import Literal

from clawbot.messages import AttachmentBlock

Kind = Literal["image", "audio", "document", "unsupported"]

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""The image formats vision models read (OpenAI, Anthropic and Gemini all take these)."""
DOCUMENT_TYPES = frozenset({"application/pdf", "application/json"})
"""Documents besides ``text/*`` (plain text, Markdown, CSV, ...)."""
GENERIC_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream"})
TEXTUAL_SUFFIXES = ("xml", "json", "javascript", "yaml", "toml", "sql", "ecmascript")
TAKEN = (
    "images (JPEG, PNG, GIF, WebP), voice notes and audio, and text, Markdown, CSV and PDF files"
)
"""What the bot takes, as a refusal says it."""


@dataclass(frozen=True)
class Sorted:
    """An attachment's kind, its MIME type as used (the platform's, or the one its name
    gives), and why it is not taken when it is not."""

    kind: Kind
    mime_type: str
    reason: str = ""
    sniff: bool = False
    """Not taken by its type, but not an image, audio or video either: it is downloaded
    and taken as a text document when its bytes are text."""


def sort(block: AttachmentBlock) -> Sorted:
    mime = block.mime_type.split(";", 1)[0].strip().lower()
    if mime in GENERIC_TYPES:
        mime = (mimetypes.guess_type(block.name)[0] or mime).lower()
    if block.voice or mime.startswith("audio/"):
        return Sorted("audio", mime)
    if mime in IMAGE_TYPES:
        return Sorted("image", mime)
    if mime.startswith("text/") or mime in DOCUMENT_TYPES:
        return Sorted("document", mime)
    if mime.startswith("image/"):
        reason = f"its format ({mime}) is not one models read; send it as JPEG, PNG, GIF or WebP"
        return Sorted("unsupported", mime, reason)
    reason = f"its type ({mime or 'unknown'}) is not one I take: I take {TAKEN}"
    return Sorted("unsupported", mime, reason, sniff=_may_be_text(mime))


def _may_be_text(mime: str) -> bool:
    """A type that does not rule text out: none (``application/octet-stream``), a
    non-standard one (``application/x-sh``, ``application/x-yaml``) or a text format filed
    under ``application/`` (XML, JavaScript, YAML, TOML, SQL). ``application/zip`` or a
    video says what the file is."""
    if mime in GENERIC_TYPES or mime.startswith("application/x-"):
        return True
    return mime.startswith("application/") and mime.endswith(TEXTUAL_SUFFIXES)


def looks_like_text(data: bytes) -> bool:
    """Whether bytes a type did not vouch for are text a person would read: UTF-8 (a byte
    order mark allowed) without a NUL, which no text file holds and nearly every binary
    format does."""
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return False
    return True
