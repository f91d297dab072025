"""Files the agent sends (``send_file``) in ``clawbot chat``: a copy saved where the person
can open it, and a line saying where.

A terminal shows no photo or document, and the agent's workspace file may change or go away
once sent, as a chat's copy would not; so the console keeps a copy of its own, as a chat
app's downloads folder does: ``CLAWBOT_HOME/downloads/``, under the name the file was sent
with (its last part, printable, no leading dot), never over an earlier file (a second
``report.pdf`` becomes ``report-2.pdf``). The line names the file, its size, what the chat
would show it as and the copy's full path, which a terminal lets one open.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from clawbot.errors import DeliveryError
from clawbot.messages import FileKind, OutboundFile, human_size

DOWNLOADS = "downloads"
"""The folder of the clawbot home the console saves sent files in."""
SHOWN_AS: dict[FileKind, str] = {
    "photo": "an image",
    "voice": "a voice note",
    "audio": "audio",
    "document": "a document",
}
MAX_TRIES = 1000


def saved_copy(folder: Path, file: OutboundFile) -> Path:
    """Write ``file``'s bytes to a new file in ``folder`` (made when missing); its path.
    ``DeliveryError`` when it cannot be written."""
    name = _safe_name(file.name)
    stem, dot, suffix = name.rpartition(".")
    if not stem:
        stem, dot, suffix = name, "", ""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for number in range(1, MAX_TRIES + 1):
            candidate = name if number == 1 else f"{stem}-{number}{dot}{suffix}"
            path = folder / candidate
            try:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                handle = os.open(path, flags, 0o666)  # as any new file: the umask decides
            except FileExistsError:
                continue
            with os.fdopen(handle, "wb") as out:
                out.write(file.data)
            return path
    except OSError as exc:
        raise DeliveryError(
            f"could not save {name} in {folder}: {exc.strerror or exc}",
            hint="make the folder writable, or free some space",
        ) from None
    raise DeliveryError(f"{folder} holds {MAX_TRIES} files named like {name} already")


def file_line(file: OutboundFile, path: Path) -> str:
    """What the terminal shows for a file sent: its caption, then where the copy is."""
    line = (
        f"[file] {_safe_name(file.name)} ({human_size(len(file.data))}, "
        f"{SHOWN_AS[file.kind]}): saved as {path}"
    )
    return f"{file.caption}\n{line}" if file.caption.strip() else line


def _safe_name(name: str) -> str:
    """The sent name's last part, printable, without a leading dot (a hidden file)."""
    last = PurePosixPath(name.replace("\\", "/")).name
    shown = "".join(ch if ch.isprintable() else "_" for ch in last).lstrip(".")
    return shown or "file"
