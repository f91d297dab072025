"""What the stand-ins record of a file the bot uploads, the content checks they make as the
platforms do (written apart from clawbot's own, so a wrong guess there is caught here), and
small sample files for tests."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass


@dataclass(frozen=True)
class ReceivedFile:
    """One file as the chat received it: in the platform's own terms, ``kind`` is how the
    chat shows it (Telegram's ``photo``, ``voice``, ``audio`` or ``document``, Discord's
    ``attachment``, Slack's ``file``), ``content_type`` what the platform took it for.
    ``after`` counts the bot's text messages in the whole stand-in before it arrived."""

    chat_id: str
    name: str
    kind: str
    data: bytes
    caption: str = ""
    content_type: str = ""
    thread_id: str | None = None
    after: int = 0


def is_image(data: bytes) -> bool:
    """JPEG, PNG, GIF or WebP, by signature: what the platforms process as a picture."""
    return data.startswith((b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a")) or (
        data.startswith(b"RIFF") and data[8:12] == b"WEBP"
    )


def is_voice(data: bytes) -> bool:
    """What Telegram plays as a voice note: OGG with Opus, MP3 or M4A."""
    return (data.startswith(b"OggS") and b"OpusHead" in data[:80]) or is_audio(data)


def is_audio(data: bytes) -> bool:
    """What Telegram's ``sendAudio`` takes: MP3 or M4A."""
    mp3 = data.startswith(b"ID3") or (len(data) > 1 and data[0] == 0xFF and data[1] >= 0xE0)
    return mp3 or (data[4:8] == b"ftyp" and data[8:11] == b"M4A")


def content_type_of(name: str, data: bytes) -> str:
    """The content type a platform gives an upload: by its bytes for media, else by name."""
    if data.startswith(b"\x89PNG"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"OggS"):
        return "audio/ogg"
    if is_audio(data):
        return "audio/mp4" if data[4:8] == b"ftyp" else "audio/mpeg"
    if name.endswith(".pdf"):
        return "application/pdf"
    if name.endswith((".txt", ".md")):
        return "text/plain; charset=utf-8"
    return "application/octet-stream"


def png(width: int = 2, height: int = 2) -> bytes:
    """A real (tiny, grey) PNG image."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


MP3 = b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\xff\xfb\x90\x64" + bytes(400)
"""The start of an MP3 file: an empty ID3v2 tag, then one MPEG-1 Layer III frame header."""
OGG_OPUS = (
    b"OggS\x00\x02"
    + bytes(20)
    + b"\x01\x13"
    + b"OpusHead\x01\x01\x38\x01\x80\xbb\x00\x00\x00\x00\x00"
)
"""The first page of an OGG/Opus stream (a voice note's start)."""
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
