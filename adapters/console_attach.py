"""``/attach PATH [text]`` in ``clawbot chat``: a local file sent with a message, as a
platform's attachment is. The file is only named here (its path, size and type); the media
plug-in reads it when the turn needs it, through :meth:`ConsoleAdapter.fetch_attachment`,
under the same caps as a platform's download.

The path is the operator's own, on their own machine: any file they can read, relative to
the folder ``clawbot chat`` runs in, ``~`` for their home. Quote a path with spaces:
``/attach "my notes.md" summarise``.
"""

from __future__ import annotations

import mimetypes
import os
import stat
from pathlib import Path

from clawbot.errors import InputError
from clawbot.messages import Attachment

ATTACH = "/attach"
USAGE = "usage: /attach PATH [text] (quote a path with spaces)"


def is_attach(text: str) -> bool:
    """Whether a typed line attaches a file (a message, not a command)."""
    head = text.strip().split(maxsplit=1)
    return bool(head) and head[0].lower() == ATTACH


def attach(text: str) -> tuple[Attachment, str]:
    """The file an ``/attach`` line names and the message's text; an InputError saying
    what is wrong with the line or the file."""
    rest = text.strip()[len(ATTACH) :].strip()
    if not rest:
        raise InputError(USAGE)
    if rest[0] in "\"'":
        end = rest.find(rest[0], 1)
        if end < 0:
            raise InputError(f"the path's closing {rest[0]} is missing; {USAGE}")
        raw, said = rest[1:end], rest[end + 1 :].strip()
    else:
        raw, _, said = rest.partition(" ")
    path = Path(raw).expanduser().absolute()
    try:
        info = path.stat()
    except FileNotFoundError:
        raise InputError(f"no such file: {raw}") from None
    except OSError as exc:
        raise InputError(f"cannot read {raw}: {(exc.strerror or 'error').lower()}") from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{raw} is not a plain file")
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    attachment = Attachment(name=path.name, mime_type=mime, size=info.st_size, ref=str(path))
    return attachment, said.strip()


def read_local(attachment: Attachment, max_bytes: int) -> bytes:
    """The attached file's bytes, at most ``max_bytes`` (blocking: run it off the loop)."""
    try:
        fd = os.open(attachment.ref, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise InputError(
            f"cannot read {attachment.name}: {(exc.strerror or 'error').lower()}"
        ) from None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise InputError(f"{attachment.name} is not a plain file")
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputError(f"{attachment.name} is over the {max_bytes}-byte limit")
    return data
