"""How a chat should show a file the bot sends, told from its first bytes.

A file's name can say anything (``notes.png`` holding text); the platforms check the content
(Telegram refuses a ``sendPhoto`` that is no image, and shows a ``sendVoice`` as a voice note
only when it is OGG/Opus, MP3 or M4A). So the kind comes from the bytes: JPEG, PNG and WebP
show as photos, OGG/Opus as a voice note, MP3 and M4A as audio, everything else as a
document, named as it is.
"""

from __future__ import annotations

import mimetypes

from clawbot.messages import FileKind

HEAD_BYTES = 64
"""How much of a file :func:`file_kind` looks at."""


def file_kind(head: bytes, name: str) -> tuple[FileKind, str]:
    """The kind and MIME type of a file that starts with ``head`` and is called ``name``."""
    if head.startswith(b"\xff\xd8\xff"):
        return "photo", "image/jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "photo", "image/png"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "photo", "image/webp"
    if head.startswith(b"OggS"):
        # The first page of an Ogg stream holds its codec's header; Opus names itself.
        return ("voice" if b"OpusHead" in head[:HEAD_BYTES] else "document"), "audio/ogg"
    if head.startswith(b"ID3") or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return "audio", "audio/mpeg"
    if head[4:8] == b"ftyp" and head[8:12] in (b"M4A ", b"M4B "):
        return "audio", "audio/mp4"
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return "document", guessed or "application/octet-stream"


def extension_of(mime_type: str) -> str:
    """A file name extension for ``mime_type`` (``.ogg`` for a voice note), ``.bin`` when
    none is known: for files clawbot makes itself (a reply read aloud)."""
    known = {"audio/ogg": ".ogg", "audio/mpeg": ".mp3", "audio/mp4": ".m4a"}
    return known.get(mime_type) or mimetypes.guess_extension(mime_type) or ".bin"
